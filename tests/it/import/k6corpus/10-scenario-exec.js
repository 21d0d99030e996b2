// A scenario that runs a named function, not the default one.
// not converted: 30
import http from 'k6/http';
import { check, group } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  scenarios: {
    browse: {
      executor: 'per-vu-iterations',
      vus: 1,
      iterations: 1,
      maxDuration: '30s',
      exec: 'browse',
      gracefulStop: '5s',
    },
  },
};

export function browse() {
  group('browse', () => {
    const res = http.get(`${BASE}/categories`);
    check(res, { 'categories': (r) => r.status === 200 });
    http.get(`${BASE}/categories/shoes?sort=price`);
  });
}

export default function () {
  http.get(`${BASE}/never-run-by-this-scenario`);
}
