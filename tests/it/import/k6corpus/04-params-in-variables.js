// Bodies and params held in names, some at the top, some in the function.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json' };
const params = { headers: JSON_HEADERS, tags: { name: 'orders' } };

export const options = { vus: 1, iterations: 1 };

export default function () {
  const order = { customer: 'c-100', lines: [{ sku: 'sku-1', qty: 1 }] };
  const payload = JSON.stringify(order);
  const res = http.post(`${BASE}/orders`, payload, params);
  check(res, { 'order created': (r) => r.status === 200 });
  const query = '?status=open&limit=20';
  const listParams = { headers: { Accept: 'application/json' } };
  http.get(`${BASE}/orders${query}`, listParams);
  let note = 'rush';
  note = note + '-delivery';
  http.patch(`${BASE}/orders/o-1`, JSON.stringify({ note }), params);
}
