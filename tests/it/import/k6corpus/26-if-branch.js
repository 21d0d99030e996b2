// A request made only when an earlier response says so.
// not converted: 13
// k6-only: GET /beta/dashboard
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const res = http.get(`${BASE}/feature-flags`);
  if (res.status === 200) {
    http.get(`${BASE}/beta/dashboard`);
  }
  http.get(`${BASE}/dashboard`);
}
