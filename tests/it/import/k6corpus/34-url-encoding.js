// Encoded query values and the http.url tag.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const q = encodeURIComponent('red shoes/size 42');
  http.get(`${BASE}/search?q=${q}`);
  const id = 'ord-7';
  http.get(http.url`${BASE}/orders/${id}`);
}
