//! What protean-wan reads from a packet: its size and number of packets on the wire, and its
//! flow. A packet read from a TUN device with `IFF_VNET_HDR` starts with a `virtio_net_hdr`
//! (10 bytes); with segmentation offload on, one read may carry a whole TCP segment train
//! (`gso_type` TCPv4/TCPv6, cut into `gso_size` payloads by whoever receives it), which counts as
//! that many packets on the wire, each with its own IP and TCP headers.

use crate::sched::Packet;

/// Length of `struct virtio_net_hdr`, the TUN default (`TUNSETVNETHDRSZ` not used).
pub const VNET_HDR_LEN: usize = 10;

const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// The wire view of `buf`, a packet as read from the TUN device (virtio header first).
pub fn inspect(buf: &[u8]) -> Packet {
    let Some((vh, ip)) = buf.split_at_checked(VNET_HDR_LEN) else {
        return Packet {
            bytes: buf.len() as u32,
            segs: 1,
            flow: 0,
        };
    };
    let len = ip.len() as u32;
    let single = Packet {
        bytes: len,
        segs: 1,
        flow: 0,
    };
    let Some(h) = headers(ip) else {
        return single;
    };
    let flow = h.flow;
    let gso_type = vh[1] & !GSO_ECN;
    let gso_size = u16::from_le_bytes([vh[4], vh[5]]) as u32;
    if gso_type == GSO_NONE || gso_size == 0 || h.hdr_len >= len {
        return Packet { flow, ..single };
    }
    let segs = (len - h.hdr_len).div_ceil(gso_size).max(1);
    Packet {
        bytes: len + (segs - 1) * h.hdr_len,
        segs,
        flow,
    }
}

struct Headers {
    /// IP and transport headers.
    hdr_len: u32,
    flow: u32,
}

fn headers(ip: &[u8]) -> Option<Headers> {
    let (proto, l4, addrs, first_fragment) = match ip.first()? >> 4 {
        4 if ip.len() >= 20 => {
            let ihl = (ip[0] & 15) as usize * 4;
            let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            (ip[9], ihl, &ip[12..20], frag_off == 0)
        }
        6 if ip.len() >= 40 => (ip[6], 40, &ip[8..40], true),
        _ => return None,
    };
    let mut h = 0xcbf2_9ce4_8422_2325u64; // FNV-1a
    let mut mix = |b: &[u8]| {
        for &x in b {
            h = (h ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    mix(addrs);
    mix(&[proto]);
    let l4_len = match proto {
        PROTO_TCP if first_fragment && ip.len() >= l4 + 20 => {
            mix(&ip[l4..l4 + 4]);
            (ip[l4 + 12] >> 4) as usize * 4
        }
        PROTO_UDP if first_fragment && ip.len() >= l4 + 8 => {
            mix(&ip[l4..l4 + 4]);
            8
        }
        _ => 0,
    };
    Some(Headers {
        hdr_len: (l4 + l4_len) as u32,
        flow: (h ^ (h >> 32)) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A virtio header and an IPv4 TCP packet (20 + 32 bytes of headers) with `payload` bytes.
    fn tcp4(gso_type: u8, gso_size: u16, src_port: u16, payload: usize) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN];
        b[1] = gso_type;
        b[4..6].copy_from_slice(&gso_size.to_le_bytes());
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[9] = PROTO_TCP;
        ip[12..16].copy_from_slice(&[10, 201, 1, 1]);
        ip[16..20].copy_from_slice(&[10, 201, 2, 1]);
        b.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 32];
        tcp[0..2].copy_from_slice(&src_port.to_be_bytes());
        tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
        tcp[12] = 8 << 4;
        b.extend_from_slice(&tcp);
        b.resize(b.len() + payload, 0xab);
        b
    }

    #[test]
    fn a_plain_packet_is_one_packet_of_its_ip_length() {
        let p = inspect(&tcp4(0, 0, 1000, 1448));
        assert_eq!((p.bytes, p.segs), (1500, 1));
    }

    #[test]
    fn an_offload_packet_counts_each_segment_with_its_headers() {
        // 10 full segments of 1448 and one of 100: 11 packets, each with 52 bytes of headers.
        let p = inspect(&tcp4(1, 1448, 1000, 14_480 + 100));
        assert_eq!(p.segs, 11);
        assert_eq!(p.bytes, 14_580 + 11 * 52);
        // ECN bit set on the type.
        let q = inspect(&tcp4(1 | GSO_ECN, 1448, 1000, 14_480 + 100));
        assert_eq!(q, p);
    }

    #[test]
    fn flows_differ_by_port_and_agree_within_a_flow() {
        let a = inspect(&tcp4(0, 0, 1000, 10));
        let b = inspect(&tcp4(0, 0, 1000, 500));
        let c = inspect(&tcp4(0, 0, 1001, 10));
        assert_eq!(a.flow, b.flow);
        assert_ne!(a.flow, c.flow);
    }

    #[test]
    fn short_or_unknown_packets_are_single() {
        assert_eq!(inspect(&[0u8; 4]).segs, 1);
        let mut b = vec![0u8; VNET_HDR_LEN + 30];
        b[VNET_HDR_LEN] = 0x10; // not IP
        b[1] = 1;
        b[4] = 100;
        let p = inspect(&b);
        assert_eq!((p.bytes, p.segs, p.flow), (30, 1, 0));
    }
}
