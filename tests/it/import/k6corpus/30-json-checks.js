// Checks on JSON values, headers, status ranges and lists of statuses.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const res = http.get(`${BASE}/api/status`);
  check(res, {
    'status ok': (r) => r.json('status') === 'ok',
    'count is 3': (r) => r.json().count === 3,
    'has token': (r) => r.json('token') !== undefined,
    'is json': (r) => r.headers['Content-Type'] === 'application/json',
    '2xx': (r) => r.status >= 200 && r.status < 300,
    'accepted': (r) => [200, 201, 204].includes(r.status),
    'mentions items': (r) => r.body.indexOf('items') !== -1,
  });
  http.get(`${BASE}/api/status/details`);
}
