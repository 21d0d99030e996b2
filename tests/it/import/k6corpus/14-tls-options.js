// TLS options a team sets for a staging host with its own certificates.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  iterations: 1,
  insecureSkipTLSVerify: true,
  tlsVersion: { min: http.TLS_1_2, max: http.TLS_1_3 },
  userAgent: 'shop-loadtest/1.0',
};

export default function () {
  http.get(`${BASE}/secure/ping`);
  http.get(`${BASE}/secure/config`);
}
