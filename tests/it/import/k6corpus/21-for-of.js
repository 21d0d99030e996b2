// Adding each of a fixed list of products to the cart.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const SKUS = ['sku-1', 'sku-2', 'sku-3'];

export const options = { iterations: 1 };

export default function () {
  for (const sku of SKUS) {
    const res = http.post(`${BASE}/cart/items`, JSON.stringify({ sku, qty: 1 }), {
      headers: { 'Content-Type': 'application/json' },
    });
    check(res, { [`added ${sku}`]: (r) => r.status === 200 });
  }
  http.get(`${BASE}/cart`);
}
