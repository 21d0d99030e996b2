// Two scenarios: the second (starting later) is not converted.
// not converted: 21
// k6-only: GET /admin/reports
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  scenarios: {
    shoppers: { executor: 'shared-iterations', vus: 1, iterations: 1, exec: 'shop' },
    admins: { executor: 'per-vu-iterations', vus: 1, iterations: 1, exec: 'admin', startTime: '1s' },
  },
};

export function shop() {
  http.get(`${BASE}/shop`);
  http.get(`${BASE}/shop/cart`);
}

export function admin() {
  http.get(`${BASE}/admin/reports`);
}
