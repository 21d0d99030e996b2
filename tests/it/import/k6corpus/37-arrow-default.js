// An arrow default export and small arrow helpers.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const path = (p) => `${BASE}/v1${p}`;
const get = (p) => http.get(path(p));

export const options = { iterations: 1 };

export default () => {
  get('/ping');
  get('/time');
  http.post(path('/echo'), 'plain text body');
};
