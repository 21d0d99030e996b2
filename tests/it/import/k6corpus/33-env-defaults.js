// Environment variables with the script's own defaults.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const VERSION = __ENV.API_VERSION || 'v2';
const TENANT = __ENV.TENANT ?? 'acme';

export const options = { iterations: 1 };

export default function () {
  http.get(`${BASE}/api/${VERSION}/tenants/${TENANT}`);
  http.get(BASE + '/api/' + VERSION + '/tenants/' + TENANT + '/users?active=true');
}
