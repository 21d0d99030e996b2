// Nested groups, written both ways.
import http from 'k6/http';
import { check, group, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  group('storefront', function () {
    http.get(`${BASE}/`);
    group('search', () => {
      const res = http.get(`${BASE}/search?q=boots`);
      check(res, { 'results': (r) => r.body.includes('items') });
    });
    sleep(0.02);
  });
  group('account', () => {
    http.get(`${BASE}/account`);
  });
}
