// One `res` re-assigned request after request: each check belongs to the latest response.
import http from 'k6/http';
import { check, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { vus: 1, iterations: 1 };

export default function () {
  let res = http.get(`${BASE}/products`);
  check(res, { 'list ok': (r) => r.status === 200 });
  res = http.get(`${BASE}/products/p-1`);
  check(res, { 'product ok': (r) => r.status === 200, 'has sku': (r) => r.body.includes('sku') });
  sleep(0.05);
  res = http.post(`${BASE}/cart/items`, JSON.stringify({ sku: 'sku-1', qty: 2 }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(res, { 'added': (r) => r.status === 200 });
  res = http.del(`${BASE}/cart/items/sku-1`);
  check(res, { 'removed': (r) => r.status === 200 });
}
