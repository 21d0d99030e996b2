// Three iterations of one VU, with think time.
import http from 'k6/http';
import { sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { vus: 1, iterations: 3 };

export default function () {
  http.get(`${BASE}/tick`);
  sleep(0.01);
  http.get(`${BASE}/tock`);
}
