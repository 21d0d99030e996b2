// A JSON body of integers, decimals, booleans, nulls, nested arrays and index-like keys.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1, vus: 1 };

export default function () {
  const body = {
    limit: 500,
    offset: 0,
    ratio: 0.25,
    price: 1999.99,
    big: 1e21,
    negative: -42,
    active: true,
    parent: null,
    ids: [1, 2, 3],
    matrix: [[1, 2], [3, 4.5]],
    2: 'two',
    1: 'one',
    nested: { depth: 3, label: 'a "quoted" label\nwith a newline' },
  };
  http.post(`${BASE}/search`, JSON.stringify(body), { headers: { 'Content-Type': 'application/json' } });
  http.put(`${BASE}/limits`, JSON.stringify({ max: 100, min: 1, step: 10 }));
}
