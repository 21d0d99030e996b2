//! Kernel transmit stamps and the kernel's connect time, beside [`super::rx`]'s receive stamps.
//!
//! A request timed in user space carries sloburn's own scheduling: a task preempted (by a CPU
//! hog, or a CFS quota that throttles the whole process) between taking the request's start and
//! handing its bytes to the kernel adds that stall to `sending`. With `SO_TIMESTAMPING` the
//! kernel stamps each write's bytes as they enter the packet scheduler (`TX_SCHED`) and as they
//! leave for the device (`TX_SOFTWARE`), and queues the stamps on the socket's error queue; with
//! `OPT_ID` each stamp names the byte offset of the write's last byte, with `OPT_TSONLY` it
//! carries no copy of the bytes. [`drain`] reads them; the client's stream
//! ([`super::rx::RxTcp`]) drains after each write and before each read and reports them to the
//! connection's `IoStats`, which places a request's `sending` between the first and the last of
//! its own bytes' stamps and starts `waiting` at the last.
//!
//! Bounds: a drain reads at most [`MAX_DRAIN`] messages, never blocks (`MSG_DONTWAIT`), and keeps
//! nothing but a few atomics per connection; the kernel bounds the error queue by the socket's
//! receive buffer and drops stamps past it (then the request falls back to user-space timing).
//!
//! The connect: `TCP_INFO`'s RTT, when the handshake was not retransmitted, is the kernel's own
//! measure of the SYN to the SYN-ACK; the moment sloburn's task woke to see it is not in it.
//!
//! Only on Linux, and only for plain HTTP/1.1, whose request bytes are the socket's bytes one
//! to one: TLS records and HTTP/2 frames mix requests, and those are timed as before.

#[cfg(target_os = "linux")]
use std::time::Duration;

use tokio::net::TcpStream;

/// The most error-queue messages one drain reads: two stamps per write, a few writes per
/// request; what is left waits for the next drain.
#[cfg(target_os = "linux")]
pub(crate) const MAX_DRAIN: usize = 16;

/// Turns transmit stamping on for `s`; false where the kernel refuses (or not on Linux).
#[cfg(target_os = "linux")]
pub(crate) fn enable(s: &TcpStream) -> bool {
    use nix::sys::socket::{TimestampingFlag as F, setsockopt, sockopt::Timestamping};
    let flags = F::SOF_TIMESTAMPING_TX_SOFTWARE
        | F::from_bits_retain(libc::SOF_TIMESTAMPING_TX_SCHED)
        | F::SOF_TIMESTAMPING_SOFTWARE
        | F::SOF_TIMESTAMPING_OPT_TSONLY
        | F::SOF_TIMESTAMPING_OPT_ID;
    setsockopt(s, Timestamping, &flags).is_ok()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn enable(_: &TcpStream) -> bool {
    false
}

/// Reads up to [`MAX_DRAIN`] transmit stamps from `s`'s error queue, handing each to `on` as
/// the stamped write's last byte id and the stamp (wall-clock time since the epoch).
#[cfg(target_os = "linux")]
pub(crate) fn drain(s: &TcpStream, mut on: impl FnMut(u32, Duration)) {
    for _ in 0..MAX_DRAIN {
        match next_stamp(s) {
            Some(Some((id, wall))) => on(id, wall),
            // A message that was no transmit stamp: read past it.
            Some(None) => {}
            None => return,
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn drain(_: &TcpStream, _: impl FnMut(u32, std::time::Duration)) {}

/// One error-queue message: `None` when the queue is empty (or the read failed), `Some(None)`
/// for a message that carries no transmit stamp, else the stamped byte's id and the stamp.
#[cfg(target_os = "linux")]
fn next_stamp(s: &TcpStream) -> Option<Option<(u32, Duration)>> {
    use nix::sys::socket::{ControlMessageOwned as C, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;

    /// Room for `SCM_TIMESTAMPING` (16 + 48 bytes) and `IP(V6)_RECVERR` (16 + 16 + 28), aligned
    /// as `cmsghdr`, on the stack.
    #[repr(C, align(8))]
    struct Control([u8; 256]);
    let mut cmsg = Control([0; 256]);
    let mut data = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut data)];
    let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
    let msg = recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut cmsg.0), flags).ok()?;
    let (mut stamp, mut id) = (None, None);
    for c in msg.cmsgs().ok()? {
        match c {
            C::ScmTimestampsns(ts) => {
                let (sec, nsec) = (ts.system.tv_sec(), ts.system.tv_nsec());
                if let (Ok(sec), Ok(nsec)) = (u64::try_from(sec), u32::try_from(nsec)) {
                    stamp = (sec > 0).then(|| Duration::new(sec, nsec));
                }
            }
            C::Ipv4RecvErr(e, _) | C::Ipv6RecvErr(e, _)
                if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING =>
            {
                id = Some(e.ee_data);
            }
            _ => {}
        }
    }
    Some(id.zip(stamp))
}

/// The kernel's connect time for a fresh `s`: the handshake's RTT from `TCP_INFO`, unless the
/// SYN was retransmitted (then the kernel took no sample, and the caller keeps its own timing).
#[cfg(target_os = "linux")]
pub(crate) fn connect_time(s: &TcpStream) -> Option<std::time::Duration> {
    use std::os::fd::AsRawFd;
    // SAFETY: `tcp_info` is plain old data, zero is a valid value of it; getsockopt writes at
    // most `len` bytes into it and the fd is open for the call's length (borrowed from `s`).
    let (rc, info) = unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        );
        (rc, info)
    };
    (rc == 0 && info.tcpi_total_retrans == 0)
        .then(|| std::time::Duration::from_micros(u64::from(info.tcpi_rtt.max(1))))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn connect_time(_: &TcpStream) -> Option<std::time::Duration> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Every write is stamped with its last byte's id, after the write began; the connect's
    /// kernel time is the loopback handshake's.
    #[tokio::test]
    async fn each_write_is_stamped_with_its_last_byte() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (mut server, _) = accepted.unwrap();
        let client = client.unwrap();
        let rtt = connect_time(&client).expect("a loopback connect is not retransmitted");
        assert!(rtt < Duration::from_millis(100), "loopback RTT {rtt:?}");
        assert!(enable(&client));
        let before = crate::clock::since_epoch();
        assert_eq!(client.try_write(b"hello").unwrap(), 5);
        assert_eq!(client.try_write(b"abc").unwrap(), 3);
        let mut got = [0u8; 8];
        server.read_exact(&mut got).await.unwrap();
        let mut stamps = Vec::new();
        drain(&client, |id, at| stamps.push((id, at)));
        let ids: Vec<u32> = stamps.iter().map(|s| s.0).collect();
        // Each write: its scheduler and its software stamp.
        assert!(ids.contains(&4) && ids.contains(&7), "ids {ids:?}");
        assert!(
            stamps
                .iter()
                .all(|s| s.1 + Duration::from_millis(5) >= before)
        );
    }

    /// A peer that never reads, and stamps never drained until the kernel's queue is full: a
    /// drain returns after at most MAX_DRAIN messages, and a bounded number empties it.
    #[tokio::test]
    async fn a_drain_is_bounded_against_a_peer_that_never_reads() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let _server = accepted.unwrap();
        let client = client.unwrap();
        assert!(enable(&client));
        let chunk = [7u8; 64];
        let mut writes = 0;
        while writes < 20_000 && client.try_write(&chunk).is_ok() {
            writes += 1;
        }
        let mut per_drain = Vec::new();
        for _ in 0..10_000 {
            let mut n = 0;
            drain(&client, |_, _| n += 1);
            per_drain.push(n);
            if n == 0 {
                break;
            }
        }
        assert!(per_drain.iter().all(|n| *n <= MAX_DRAIN), "{per_drain:?}");
        assert_eq!(per_drain.last(), Some(&0), "the error queue emptied");
        assert!(per_drain.len() > 1, "{writes} writes queued stamps");
    }
}
