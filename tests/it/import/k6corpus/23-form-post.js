// A classic HTML form: an object body k6 sends form-encoded.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const form = { name: 'Jane Doe', email: 'jane+test@example.com', message: 'Hello & welcome!', age: 42 };
  const res = http.post(`${BASE}/contact`, form);
  check(res, { 'sent': (r) => r.status === 200 });
  http.post(`${BASE}/login-form`, { user: 'jane', password: 'p@ss word' }, {
    headers: { 'X-Requested-With': 'XMLHttpRequest' },
  });
}
