//! Opening a TUN device inside a network namespace.
//!
//! The calling thread enters the namespace (`setns`), opens `/dev/net/tun` and attaches to the
//! named device (or, when asked, creates it if there is none by that name: such a device lives
//! as long as protean-wan), sets its MTU if asked, brings it up and sets its offloads, then
//! returns to its own namespace. The descriptor keeps working from any namespace.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use crate::packet::VNET_HDR_LEN;

/// One end of the link: a TUN device in a network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As given: a name under /run/netns, or a path (such as /proc/PID/ns/net).
    pub netns: String,
    pub dev: String,
}

impl Endpoint {
    pub const DEFAULT_DEV: &'static str = "wan0";

    /// Parses `NETNS[:DEV]`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (netns, dev) = match s.rsplit_once(':') {
            Some((n, d)) => (n, d),
            None => (s, Self::DEFAULT_DEV),
        };
        if netns.is_empty() {
            return Err(format!("'{s}': no network namespace (NETNS[:DEV])"));
        }
        if dev.is_empty() || dev.len() >= libc::IFNAMSIZ || dev.contains(['/', ' ']) {
            return Err(format!(
                "'{dev}' is not a valid device name (1 to {} characters, no '/' or space)",
                libc::IFNAMSIZ - 1
            ));
        }
        Ok(Endpoint {
            netns: netns.to_string(),
            dev: dev.to_string(),
        })
    }

    fn netns_path(&self) -> PathBuf {
        if self.netns.contains('/') {
            PathBuf::from(&self.netns)
        } else {
            PathBuf::from("/run/netns").join(&self.netns)
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.netns, self.dev)
    }
}

/// An open TUN device.
pub struct Tun {
    fd: OwnedFd,
    /// Whether protean-wan created the device (it goes away when protean-wan exits).
    pub created: bool,
    pub mtu: u32,
}

impl Tun {
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn last_os_error(what: impl std::fmt::Display) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// Returns the thread to its network namespace when dropped.
struct NetnsGuard {
    home: File,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // SAFETY: setns on a descriptor we own.
        if unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            // Staying in a foreign namespace would open the other end in the wrong place.
            eprintln!(
                "protean-wan: cannot return to the original network namespace: {}",
                io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
}

fn enter(ep: &Endpoint) -> Result<NetnsGuard, String> {
    let home = File::open("/proc/thread-self/ns/net")
        .map_err(|e| format!("cannot open this thread's network namespace: {e}"))?;
    let path = ep.netns_path();
    let ns = File::open(&path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            if ep.netns.contains('/') {
                format!("network namespace {} does not exist", path.display())
            } else {
                format!(
                    "network namespace '{}' does not exist (no {}; see `ip netns list`)",
                    ep.netns,
                    path.display()
                )
            }
        } else {
            format!("cannot open network namespace {}: {e}", path.display())
        }
    })?;
    // SAFETY: setns on a descriptor we own.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EINVAL) {
            format!("{} is not a network namespace", path.display())
        } else {
            format!("cannot enter network namespace {}: {e}", path.display())
        });
    }
    Ok(NetnsGuard { home })
}

fn ifreq(dev: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    r
}

/// Offloads asked of the device: checksum and TCP segmentation (both IP versions), so that the
/// kernel hands over whole segment trains of up to 64 KiB.
pub const OFFLOADS: libc::c_uint =
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;

/// Opens `ep`'s device: attaches to it or (if `create`) creates it, sets `mtu` if given, brings
/// it up, sets the offloads, and makes the descriptor non-blocking.
pub fn open(ep: &Endpoint, mtu: Option<u32>, offload: bool, create: bool) -> Result<Tun, String> {
    let _guard = enter(ep)?;
    let ctl_fd = {
        // SAFETY: plain socket call.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_os_error("socket"));
        }
        // SAFETY: fd is a new descriptor we own.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let ctl = ctl_fd.as_raw_fd();

    let name = CString::new(ep.dev.as_str()).map_err(|_| format!("bad device name {}", ep.dev))?;
    // SAFETY: name is NUL-terminated.
    let existed = unsafe { libc::if_nametoindex(name.as_ptr()) } != 0;
    if !existed && !create {
        return Err(format!(
            "there is no device {} in network namespace {} (make one with `ip -n {} tuntap add \
             dev {} mode tun`, or pass --create)",
            ep.dev, ep.netns, ep.netns, ep.dev
        ));
    }

    let path = c"/dev/net/tun";
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last_os_error("cannot open /dev/net/tun"));
    }
    // SAFETY: fd is a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = ifreq(&ep.dev);
    req.ifr_ifru.ifru_flags =
        (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
    // SAFETY: TUNSETIFF takes a struct ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } != 0 {
        let e = io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EBUSY) => "it is in use by another process (a TUN device takes one)".into(),
            Some(libc::EINVAL) | Some(libc::EEXIST) => {
                "a device of that name exists and is not a single-queue TUN device".into()
            }
            Some(libc::EPERM) => "not permitted (needs CAP_NET_ADMIN)".into(),
            _ => e.to_string(),
        };
        return Err(format!("cannot attach to {ep}: {why}"));
    }
    let mut vnet = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ takes an int.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &mut vnet) } != 0 {
        return Err(last_os_error(format!("{ep}: TUNSETVNETHDRSZ")));
    }
    let offloads: libc::c_uint = if offload { OFFLOADS } else { 0 };
    // SAFETY: TUNSETOFFLOAD takes an unsigned int by value.
    if unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            offloads as libc::c_ulong,
        )
    } != 0
    {
        return Err(last_os_error(format!("{ep}: cannot set offloads")));
    }

    if let Some(mtu) = mtu {
        let mut r = ifreq(&ep.dev);
        r.ifr_ifru.ifru_mtu = mtu as libc::c_int;
        // SAFETY: SIOCSIFMTU takes a struct ifreq.
        if unsafe { libc::ioctl(ctl, libc::SIOCSIFMTU, &mut r) } != 0 {
            return Err(last_os_error(format!("{ep}: cannot set the MTU to {mtu}")));
        }
    }
    let mut r = ifreq(&ep.dev);
    // SAFETY: SIOCGIFFLAGS / SIOCSIFFLAGS take a struct ifreq.
    unsafe {
        if libc::ioctl(ctl, libc::SIOCGIFFLAGS, &mut r) != 0 {
            return Err(last_os_error(format!("{ep}: SIOCGIFFLAGS")));
        }
        r.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(ctl, libc::SIOCSIFFLAGS, &mut r) != 0 {
            return Err(last_os_error(format!("{ep}: cannot bring the device up")));
        }
    }
    let mut r = ifreq(&ep.dev);
    // SAFETY: SIOCGIFMTU takes a struct ifreq.
    let mtu = unsafe {
        if libc::ioctl(ctl, libc::SIOCGIFMTU, &mut r) != 0 {
            return Err(last_os_error(format!("{ep}: SIOCGIFMTU")));
        }
        r.ifr_ifru.ifru_mtu as u32
    };
    // SAFETY: fcntl on our descriptor.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) != 0 {
            return Err(last_os_error("fcntl O_NONBLOCK"));
        }
    }
    Ok(Tun {
        fd,
        created: !existed,
        mtu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_syntax() {
        assert_eq!(
            Endpoint::parse("gwa").unwrap(),
            Endpoint {
                netns: "gwa".into(),
                dev: "wan0".into()
            }
        );
        assert_eq!(
            Endpoint::parse("/proc/1/ns/net:t1").unwrap(),
            Endpoint {
                netns: "/proc/1/ns/net".into(),
                dev: "t1".into()
            }
        );
        assert!(Endpoint::parse(":wan0").is_err());
        assert!(Endpoint::parse("gwa:").is_err());
        assert!(Endpoint::parse("gwa:a-name-that-is-too-long").is_err());
    }
}
