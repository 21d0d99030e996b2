// Checks written around the request itself.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  check(http.get(`${BASE}/`), { 'home 200': (r) => r.status === 200 });
  check(http.get(`${BASE}/about`), {
    'about 200': (r) => r.status === 200,
    'about fast': (r) => r.timings.duration < 2000,
  });
  check(http.post(`${BASE}/newsletter`, 'email=a%40example.com', {
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  }), { 'subscribed': (r) => r.status === 200 });
}
