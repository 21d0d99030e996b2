// A ramp up and down; the corpus test runs it for 1 iteration of 1 VU.
// run: --vus 1 --iterations 1
import http from 'k6/http';
import { check, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  stages: [
    { duration: '30s', target: 20 },
    { duration: '1m', target: 20 },
    { duration: '10s', target: 0 },
  ],
  thresholds: { http_req_duration: ['p(95)<300'] },
};

export default function () {
  const res = http.get(`${BASE}/products`);
  check(res, { 'ok': (r) => r.status === 200 });
  sleep(0.01);
  http.get(`${BASE}/products/p-2`);
}
