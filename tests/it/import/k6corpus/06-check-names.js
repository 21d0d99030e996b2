// Several checks of one kind on one response, and the same name checked twice.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const res = http.get(`${BASE}/catalog`);
  check(res, {
    'status is 200': (r) => r.status === 200,
    'status is not a redirect': (r) => r.status == 200,
    'has items': (r) => r.body.includes('items'),
    'has token field': (r) => r.body.includes('token'),
  });
  check(res, { 'status is 200': (r) => r.status === 200 });
  const other = http.get(`${BASE}/catalog/featured`);
  check(other, { 'status is 200': (r) => r.status === 200 });
}
