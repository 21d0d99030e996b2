// A ramping arrival rate: up, hold, down. The integral is 39.8 (10 + 20 + 9.8): k6 starts the
// i-th iteration where it reaches i, so 39, and no start races the end (grafana/k6#3052).
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  scenarios: {
    ramp: {
      executor: 'ramping-arrival-rate',
      startRate: 0,
      timeUnit: '1s',
      preAllocatedVUs: 10,
      maxVUs: 30,
      stages: [
        { target: 20, duration: '1s' },
        { target: 20, duration: '1s' },
        { target: 0, duration: '980ms' },
      ],
    },
  },
  thresholds: {
    checks: ['rate==1'],
  },
};

export default function () {
  const res = http.get(BASE + '/products?page=1');
  check(res, { 'status is 200': (r) => r.status == 200 });
}
