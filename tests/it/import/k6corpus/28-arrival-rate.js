// An open model at a constant rate; the corpus test runs it for 1 iteration of 1 VU.
// run: --vus 1 --iterations 1
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  scenarios: {
    steady: {
      executor: 'constant-arrival-rate',
      rate: 50,
      timeUnit: '1s',
      duration: '2m',
      preAllocatedVUs: 20,
      maxVUs: 100,
    },
  },
  thresholds: { http_req_failed: ['rate<0.01'] },
};

export default function () {
  http.get(`${BASE}/quote?symbol=ACME`);
}
