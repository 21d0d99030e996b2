// A fuller user journey: browse, log in, buy, with metrics and logging on the side.
import http from 'k6/http';
import { check, group, sleep } from 'k6';
import { Trend } from 'k6/metrics';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const buyTime = new Trend('buy_time');
const jsonParams = { headers: { 'Content-Type': 'application/json' } };

export const options = {
  vus: 1,
  iterations: 1,
  thresholds: {
    http_req_duration: ['p(95)<500'],
    buy_time: ['avg<300'],
    'http_req_duration{name:buy}': ['p(99)<800'],
  },
};

export default function () {
  let res;
  group('browse', () => {
    res = http.get(`${BASE}/products?limit=5`);
    check(res, { 'listed': (r) => r.status === 200 });
  });
  const pick = res.json('items.0.id');
  group('login', () => {
    res = http.post(`${BASE}/login`, JSON.stringify({ user: 'carol', password: 'pw' }), jsonParams);
    check(res, { 'token': (r) => r.json('token') !== undefined });
  });
  const token = res.json('token');
  sleep(0.02);
  res = http.post(`${BASE}/orders`, JSON.stringify({ product: pick, qty: 1 }), {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    tags: { name: 'buy' },
  });
  buyTime.add(res.timings.duration);
  console.log(`order ${res.json('id')}`);
  check(res, { 'bought': (r) => r.status === 200 });
}
