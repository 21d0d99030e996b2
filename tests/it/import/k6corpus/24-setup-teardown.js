// A setup that logs in once and a teardown that cleans up: k6 runs each once.
// not converted: 13, 24
// k6-only: POST /admin/login
// k6-only: DELETE /admin/test-data
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export function setup() {
  const res = http.post(`${BASE}/admin/login`, JSON.stringify({ user: 'admin' }));
  return { token: res.json('token') };
}

export default function (data) {
  http.get(`${BASE}/public/catalog`);
  const res = http.get(`${BASE}/public/promotions`);
  check(res, { 'promotions': (r) => r.status === 200 });
}

export function teardown(data) {
  http.del(`${BASE}/admin/test-data`);
}
