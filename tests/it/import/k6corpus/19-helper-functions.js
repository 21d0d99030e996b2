// Steps written as the script's own functions, with parameters and returned values.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

function jsonParams(token) {
  return { headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` } };
}

function login(user) {
  const res = http.post(`${BASE}/login`, JSON.stringify({ user, password: 'pw' }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(res, { 'login ok': (r) => r.status === 200 });
  return res.json('token');
}

const addToCart = (token, sku, qty) =>
  http.post(`${BASE}/cart`, JSON.stringify({ sku, qty }), jsonParams(token));

export default function () {
  const token = login('bob');
  const res = addToCart(token, 'sku-9', 3);
  check(res, { 'added to cart': (r) => r.status === 200 });
  addToCart(token, 'sku-10', 1);
}
