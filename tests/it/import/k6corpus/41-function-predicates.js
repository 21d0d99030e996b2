// Check predicates written as function expressions with a return.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const res = http.get(`${BASE}/health/deep`);
  check(res, {
    'is 200': function (r) {
      return r.status === 200;
    },
    'says ok': (r) => {
      return r.body.includes('ok');
    },
  });
}
