// Basic auth in the URL, and digest auth (which sloburn cannot do).
import http from 'k6/http';
import { check } from 'k6';

const HOST = __ENV.HOST || '127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const basic = http.get(`http://admin:s3cret@${HOST}/admin/basic`);
  check(basic, { 'basic ok': (r) => r.status === 200 });
  http.get(`http://admin:s3cret@${HOST}/admin/basic-explicit`, { auth: 'basic' });
  http.get(`http://ops:pa55@${HOST}/admin/digest`, { auth: 'digest' });
}
