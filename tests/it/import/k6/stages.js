// A ramping arrival rate: up, hold, down.
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
        { target: 0, duration: '1s' },
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
