// A GraphQL query with variables.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

const QUERY = `
  query Product($id: ID!) {
    product(id: $id) { id name price }
  }
`;

export const options = { iterations: 1 };

export default function () {
  const res = http.post(`${BASE}/graphql`, JSON.stringify({ query: QUERY, variables: { id: 'p-1', first: 10 } }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(res, { 'no errors': (r) => r.json('errors') === undefined || r.status === 200 });
}
