// A smoke test with no options at all: k6 runs one iteration of one VU.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export default function () {
  const res = http.get(`${BASE}/health`);
  check(res, { 'health is 200': (r) => r.status === 200 });
}
