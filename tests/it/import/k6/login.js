// A login flow: the token from the login's JSON goes into the next requests' header.
import http from 'k6/http';
import { check, group, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  vus: 2,
  iterations: 10,
  thresholds: { http_req_failed: ['rate==0'] },
};

export default function () {
  const login = http.post(`${BASE}/login`, JSON.stringify({ user: 'alice', password: 'wonderland' }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(login, { 'logged in': (r) => r.status === 200 });
  const token = login.json('token');
  sleep(0.1);
  group('cart', function () {
    const cart = http.get(`${BASE}/cart`, { headers: { Authorization: `Bearer ${token}` } });
    check(cart, { 'cart ok': (r) => r.status === 200, 'fast': (r) => r.timings.duration < 1000 });
    http.post(`${BASE}/cart/items`, JSON.stringify({ sku: 'sku-1', vu: __VU }), {
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    });
  });
  console.log('done');
}
