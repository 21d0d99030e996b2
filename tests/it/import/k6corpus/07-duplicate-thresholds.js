// Thresholds with a key written twice (JavaScript keeps the last) and tagged sub-metrics.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  iterations: 2,
  thresholds: {
    http_req_duration: ['p(95)<800'],
    http_req_failed: ['rate<0.01'],
    'http_req_duration{status:200}': ['p(99)<1500'],
    http_req_duration: ['p(95)<500', 'p(99)<1000'],
    checks: [{ threshold: 'rate>0.9', abortOnFail: true, delayAbortEval: '10s' }],
  },
};

export default function () {
  http.get(`${BASE}/api/v1/status`);
  http.get(`${BASE}/api/v1/version`);
}
