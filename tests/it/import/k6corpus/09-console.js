// Logging everywhere, as scripts being debugged do.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { vus: 1, iterations: 1 };

export default function () {
  console.log(`starting VU ${__VU} iteration ${__ITER}`);
  const res = http.get(`${BASE}/inventory`);
  console.info('inventory status', res.status);
  console.warn('inventory took', res.timings.duration);
  http.get(`${BASE}/inventory/low-stock`);
  console.error('done');
  console.debug(JSON.stringify(res.headers));
}
