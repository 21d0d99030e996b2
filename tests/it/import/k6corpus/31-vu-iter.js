// The VU and iteration numbers in paths and in a JSON body (as numbers).
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { vus: 1, iterations: 2 };

export default function () {
  http.get(`${BASE}/users/user-${__VU}/sessions/${__ITER}`);
  http.post(`${BASE}/telemetry`, JSON.stringify({ vu: __VU, iteration: __ITER, source: 'k6' }), {
    headers: { 'Content-Type': 'application/json' },
  });
}
