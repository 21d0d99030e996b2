// Picking the first product of a list, and the second one's SKU, from the response.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const list = http.get(`${BASE}/products?category=books`);
  const items = list.json('items');
  const first = items[0].id;
  const product = http.get(`${BASE}/products/${first}`);
  check(product, { 'product 200': (r) => r.status === 200 });
  const body = list.json();
  http.post(`${BASE}/wishlist`, JSON.stringify({ sku: body.items[1].sku, from: 'list' }), {
    headers: { 'Content-Type': 'application/json' },
  });
  http.get(`${BASE}/users/${list.json().user.id}/recommendations`);
}
