// Custom metrics of each kind, their thresholds and their add calls.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Gauge, Rate, Trend } from 'k6/metrics';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const errors = new Counter('errors');
const checkoutTime = new Trend('checkout_time', true);
const okRate = new Rate('ok_rate');
const cartSize = new Gauge('cart_size');

export const options = {
  iterations: 1,
  thresholds: {
    errors: ['count<1'],
    checkout_time: ['p(95)<400'],
    ok_rate: ['rate>0.99'],
    'http_req_duration{name:checkout}': ['p(95)<600'],
    http_reqs: ['count>=1'],
  },
};

export default function () {
  const res = http.post(`${BASE}/checkout`, JSON.stringify({ cart: 'c-1' }), {
    headers: { 'Content-Type': 'application/json' },
    tags: { name: 'checkout' },
  });
  const ok = check(res, { 'checked out': (r) => r.status === 200 });
  check(res, { 'has id': (r) => r.json('id') !== undefined }) || errors.add(1);
  checkoutTime.add(res.timings.duration);
  okRate.add(ok);
  cartSize.add(3);
  http.get(`${BASE}/orders/latest`);
}
