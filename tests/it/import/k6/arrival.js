// A constant-arrival-rate smoke test, as k6's docs write one. Its duration ends between two
// starts: on a start (3s at 20/s) k6 races its duration timer against its ticker and starts a
// 61st iteration or not (grafana/k6#3052), which no importer can match.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  scenarios: {
    steady: {
      executor: 'constant-arrival-rate',
      rate: 20,
      timeUnit: '1s',
      duration: '2990ms',
      preAllocatedVUs: 5,
      maxVUs: 20,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    http_req_duration: ['p(95)<500'],
  },
};

export default function () {
  const res = http.get(`${BASE}/health`);
  check(res, {
    'status is 200': (r) => r.status === 200,
    'says ok': (r) => r.body.includes('ok'),
  });
}
