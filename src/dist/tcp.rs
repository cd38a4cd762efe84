//! CPU collectives over TCP, for tests and CPU multi-process lab runs.
//!
//! A star: rank 0 listens on `MASTER_ADDR:port` ([`RankEnv::tcp_port`]: `MASTER_PORT`, or
//! `MASTER_PORT + 1` under torchrun's agent store) and every other rank connects to it. For a
//! reduction each rank sends its flat buffer; rank 0 adds them in rank order (0, 1, 2, ...) and
//! sends the result back, so results are bit-identical on every rank and do not depend on which
//! rank arrives first. Each frame carries the collective's kind and sequence number, so ranks
//! that call collectives in different orders or with different sizes fail loudly.
//!
//! Every socket has read and write timeouts (`RankEnv::timeout` on rank 0, twice that on the
//! others). A peer whose process dies closes its socket, which the others see at once; rank 0
//! then relays the failure to every rank and all of them return an error naming the rank that
//! failed. A peer that hangs is named the same way once rank 0's timeout passes.
use super::{check_op, check_root, check_sizes, flatten, Collectives, DistError, Op, RankEnv};
use std::io::{self, ErrorKind, Read, Write};
use std::net::ToSocketAddrs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

const MAGIC: [u8; 4] = *b"RDST";
const VERSION: u32 = 1;
/// A connected peer sends its hello at once; anything slower is not one of our ranks.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Telling peers about a failure must not itself hang.
const ABORT_TIMEOUT: Duration = Duration::from_secs(1);
const DATA: u8 = 1;
const ABORT: u8 = 2;
const HEADER: usize = 18;

/// Which collective a frame belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    AllReduce = 1,
    Broadcast = 2,
    Barrier = 3,
    ReduceScatter = 4,
    AllGather = 5,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::AllReduce => "all_reduce",
            Call::Broadcast => "broadcast",
            Call::Barrier => "barrier",
            Call::ReduceScatter => "reduce_scatter",
            Call::AllGather => "all_gather",
        }
    }

    fn name_of(code: u8) -> &'static str {
        [Call::AllReduce, Call::Broadcast, Call::Barrier, Call::ReduceScatter, Call::AllGather]
            .into_iter()
            .find(|c| *c as u8 == code)
            .map_or("an unknown collective", Call::name)
    }
}

/// One frame's header: tag, collective, sequence number, payload length.
struct Header {
    tag: u8,
    call: u8,
    seq: u64,
    len: u64,
}

enum Links {
    /// Rank 0: one stream per other rank, index `r - 1`.
    Hub(Vec<TcpStream>),
    /// Every other rank: the stream to rank 0.
    Spoke(TcpStream),
}

/// The TCP backend; see the module docs.
pub struct Tcp {
    rank: usize,
    world: usize,
    timeout: Duration,
    links: Links,
    /// Sequence number of the current collective (1 for the first).
    seq: u64,
    call: Call,
    /// The first error; once set, every call fails with it.
    failed: Option<String>,
}

impl Tcp {
    /// Joins the job: rank 0 listens and waits for all ranks, the others connect (retrying
    /// until rank 0 is up). Both give up after `env.timeout`.
    pub fn connect(env: &RankEnv) -> Result<Tcp, DistError> {
        let port = env.tcp_port()?;
        let links = if env.rank == 0 {
            Links::Hub(accept_all(env, port)?)
        } else {
            Links::Spoke(join(env, port)?)
        };
        // Rank 0 waits `timeout` for each peer; the others wait twice as long for rank 0, so
        // that when a peer is silent rank 0 notices first and tells everyone which one it is.
        let (streams, timeout): (Vec<&TcpStream>, Duration) = match &links {
            Links::Hub(s) => (s.iter().collect(), env.timeout),
            Links::Spoke(s) => (vec![s], env.timeout * 2),
        };
        for s in streams {
            s.set_nodelay(true)
                .and_then(|()| s.set_read_timeout(Some(timeout)))
                .and_then(|()| s.set_write_timeout(Some(timeout)))
                .map_err(|e| DistError::Usage(format!("configuring a rank socket: {e}")))?;
        }
        Ok(Tcp {
            rank: env.rank,
            world: env.world,
            timeout,
            links,
            seq: 0,
            call: Call::Barrier,
            failed: None,
        })
    }

    /// Runs one collective; on any error, tells the peers and poisons the backend.
    fn guarded<T>(
        &mut self,
        call: Call,
        f: impl FnOnce(&mut Tcp) -> Result<T, DistError>,
    ) -> Result<T, DistError> {
        if let Some(msg) = &self.failed {
            return Err(DistError::Poisoned(msg.clone()));
        }
        self.seq += 1;
        self.call = call;
        let out = tch::no_grad(|| f(self));
        if let Err(e) = &out {
            self.abort(&e.to_string());
        }
        out
    }

    /// Best effort: sends `msg` to the peers and closes the sockets, so no one waits on us.
    ///
    /// Closing a socket that still holds unread bytes (a peer's frame we will never read) makes
    /// the kernel send a reset, and a reset can destroy our ABORT frame in the peer's receive
    /// buffer before it reads it. So we only half-close, then read and discard until each peer
    /// closes too (it does once it has read the ABORT) or `ABORT_TIMEOUT` passes.
    fn abort(&mut self, msg: &str) {
        let (call, seq) = (self.call as u8, self.seq);
        let mut streams: Vec<&mut TcpStream> = match &mut self.links {
            Links::Hub(s) => s.iter_mut().collect(),
            Links::Spoke(s) => vec![s],
        };
        for s in streams.iter_mut() {
            let _ = s.set_write_timeout(Some(ABORT_TIMEOUT));
            let _ = write_frame(s, ABORT, call, seq, msg.as_bytes());
            let _ = s.shutdown(Shutdown::Write);
        }
        let deadline = Instant::now() + ABORT_TIMEOUT;
        for s in streams {
            drain_until_closed(s, deadline);
            let _ = s.shutdown(Shutdown::Read);
        }
        self.failed = Some(msg.to_string());
    }

    fn hub(&mut self) -> &mut Vec<TcpStream> {
        match &mut self.links {
            Links::Hub(s) => s,
            Links::Spoke(_) => unreachable!("only rank 0 is the hub"),
        }
    }

    /// Rank 0: reads rank `from`'s frame of exactly `buf.len()` bytes.
    fn hub_recv(&mut self, from: usize, buf: &mut [u8]) -> Result<(), DistError> {
        let (call, seq, timeout) = (self.call, self.seq, self.timeout);
        let s = &mut self.hub()[from - 1];
        recv(s, from, call, seq, timeout, buf)
    }

    /// Rank 0: sends `bytes` to rank `to`.
    fn hub_send(&mut self, to: usize, bytes: &[u8]) -> Result<(), DistError> {
        let (call, seq, timeout) = (self.call, self.seq, self.timeout);
        let s = &mut self.hub()[to - 1];
        write_frame(s, DATA, call as u8, seq, bytes).map_err(|e| io_err(to, call, seq, timeout, e))
    }

    fn spoke_send(&mut self, bytes: &[u8]) -> Result<(), DistError> {
        let (call, seq, timeout) = (self.call, self.seq, self.timeout);
        let Links::Spoke(s) = &mut self.links else { unreachable!("rank 0 sends with hub_send") };
        write_frame(s, DATA, call as u8, seq, bytes).map_err(|e| io_err(0, call, seq, timeout, e))
    }

    fn spoke_recv(&mut self, len: usize) -> Result<Vec<u8>, DistError> {
        let (call, seq, timeout) = (self.call, self.seq, self.timeout);
        let Links::Spoke(s) = &mut self.links else {
            unreachable!("rank 0 receives with hub_recv")
        };
        let mut buf = vec![0u8; len];
        recv(s, 0, call, seq, timeout, &mut buf)?;
        Ok(buf)
    }

    /// Rank 0: adds every rank's buffer to `mine` in rank order, then applies `op`.
    fn hub_reduce(&mut self, mine: &[u8], kind: Kind, op: Op) -> Result<Vec<u8>, DistError> {
        if mine.is_empty() {
            for r in 1..self.world {
                self.hub_recv(r, &mut [])?;
            }
            return Ok(Vec::new());
        }
        let mut acc = tensor_of(mine, kind)?;
        let mut buf = vec![0u8; mine.len()];
        for r in 1..self.world {
            self.hub_recv(r, &mut buf)?;
            let _ = acc.f_add_(&tensor_of(&buf, kind)?)?;
        }
        if op == Op::Avg {
            let _ = acc.f_div_scalar_(self.world as f64)?;
        }
        bytes_of(&acc)
    }

    /// Every rank sends `mine`; every rank gets the reduction of all of them.
    fn reduce_everywhere(
        &mut self,
        mine: Vec<u8>,
        kind: Kind,
        op: Op,
    ) -> Result<Vec<u8>, DistError> {
        if self.rank == 0 {
            let result = self.hub_reduce(&mine, kind, op)?;
            for r in 1..self.world {
                self.hub_send(r, &result)?;
            }
            Ok(result)
        } else {
            self.spoke_send(&mine)?;
            self.spoke_recv(mine.len())
        }
    }
}

impl Collectives for Tcp {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn backend(&self) -> &'static str {
        "tcp"
    }

    fn all_reduce(&mut self, tensors: &mut [Tensor], op: Op) -> Result<(), DistError> {
        self.guarded(Call::AllReduce, |me| {
            // An empty list still takes part, so every rank stays on the same call.
            let (mine, kind) = match flatten(tensors, op)? {
                Some(buf) => (bytes_of(&buf)?, buf.f_kind()?),
                None => (Vec::new(), Kind::Float),
            };
            let result = me.reduce_everywhere(mine, kind, op)?;
            let mut offset = 0;
            for t in tensors.iter_mut() {
                let n = t.numel();
                let end = offset + n * kind.elt_size_in_bytes();
                write_into(t, &result[offset..end], kind)?;
                offset = end;
            }
            Ok(())
        })
    }

    fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<(), DistError> {
        self.guarded(Call::Broadcast, |me| {
            check_root(root, me.world)?;
            let kind = tensor.f_kind()?;
            let len = tensor.numel() * kind.elt_size_in_bytes();
            if me.rank == 0 {
                let data = if root == 0 {
                    bytes_of(tensor)?
                } else {
                    let mut buf = vec![0u8; len];
                    me.hub_recv(root, &mut buf)?;
                    buf
                };
                for r in (1..me.world).filter(|r| *r != root) {
                    me.hub_send(r, &data)?;
                }
                if root != 0 {
                    write_into(tensor, &data, kind)?;
                }
            } else if me.rank == root {
                me.spoke_send(&bytes_of(tensor)?)?;
            } else {
                let data = me.spoke_recv(len)?;
                write_into(tensor, &data, kind)?;
            }
            Ok(())
        })
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        self.guarded(Call::Barrier, |me| {
            me.reduce_everywhere(Vec::new(), Kind::Float, Op::Sum).map(drop)
        })
    }

    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        op: Op,
    ) -> Result<(), DistError> {
        self.guarded(Call::ReduceScatter, |me| {
            let kind =
                check_sizes("reduce_scatter", (input, "input"), (output, "output"), me.world)?;
            check_op(kind, op)?;
            let chunk = output.numel() * kind.elt_size_in_bytes();
            let mine = bytes_of(input)?;
            let own = if me.rank == 0 {
                let result = me.hub_reduce(&mine, kind, op)?;
                for r in 1..me.world {
                    me.hub_send(r, &result[r * chunk..(r + 1) * chunk])?;
                }
                result[..chunk].to_vec()
            } else {
                me.spoke_send(&mine)?;
                me.spoke_recv(chunk)?
            };
            write_into(output, &own, kind)
        })
    }

    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError> {
        self.guarded(Call::AllGather, |me| {
            let kind = check_sizes("all_gather", (output, "output"), (input, "input"), me.world)?;
            let mine = bytes_of(input)?;
            let full = if me.rank == 0 {
                let mut full = Vec::with_capacity(mine.len() * me.world);
                full.extend_from_slice(&mine);
                let mut buf = vec![0u8; mine.len()];
                for r in 1..me.world {
                    me.hub_recv(r, &mut buf)?;
                    full.extend_from_slice(&buf);
                }
                for r in 1..me.world {
                    me.hub_send(r, &full)?;
                }
                full
            } else {
                me.spoke_send(&mine)?;
                me.spoke_recv(mine.len() * me.world)?
            };
            write_into(output, &full, kind)
        })
    }
}

/// The tensor's elements as bytes, on the CPU, contiguous.
fn bytes_of(t: &Tensor) -> Result<Vec<u8>, DistError> {
    let t = t.f_to_device(Device::Cpu)?.f_contiguous()?;
    let n = t.numel();
    let mut out = vec![0u8; n * t.f_kind()?.elt_size_in_bytes()];
    if n > 0 {
        t.f_copy_data_u8(&mut out, n)?;
    }
    Ok(out)
}

/// A flat CPU tensor over a copy of `bytes`.
fn tensor_of(bytes: &[u8], kind: Kind) -> Result<Tensor, DistError> {
    let n = (bytes.len() / kind.elt_size_in_bytes()) as i64;
    Ok(Tensor::f_from_data_size(bytes, &[n], kind)?)
}

/// Copies `bytes` into `t` in place (any device, any shape with that many elements).
fn write_into(t: &mut Tensor, bytes: &[u8], kind: Kind) -> Result<(), DistError> {
    if t.numel() == 0 {
        return Ok(());
    }
    let src = tensor_of(bytes, kind)?.f_view(t.size().as_slice())?;
    t.f_copy_(&src)?;
    Ok(())
}

fn write_frame(s: &mut TcpStream, tag: u8, call: u8, seq: u64, payload: &[u8]) -> io::Result<()> {
    let mut head = [0u8; HEADER];
    head[0] = tag;
    head[1] = call;
    head[2..10].copy_from_slice(&seq.to_le_bytes());
    head[10..18].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    s.write_all(&head)?;
    s.write_all(payload)
}

fn read_header(s: &mut TcpStream) -> io::Result<Header> {
    let mut head = [0u8; HEADER];
    s.read_exact(&mut head)?;
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
    Ok(Header { tag: head[0], call: head[1], seq: word(2), len: word(10) })
}

/// Reads peer `from`'s next frame into `buf`, checking that it belongs to this collective and
/// has the expected size; an ABORT frame becomes the error it carries.
fn recv(
    s: &mut TcpStream,
    from: usize,
    call: Call,
    seq: u64,
    timeout: Duration,
    buf: &mut [u8],
) -> Result<(), DistError> {
    let io = |e| io_err(from, call, seq, timeout, e);
    let head = read_header(s).map_err(io)?;
    if head.tag == ABORT {
        let mut msg = vec![0u8; head.len.min(64 * 1024) as usize];
        s.read_exact(&mut msg).map_err(io)?;
        let msg = String::from_utf8_lossy(&msg).into_owned();
        return Err(if from == 0 {
            DistError::Relayed(msg)
        } else {
            DistError::Peer { rank: from, what: format!("failed: {msg}") }
        });
    }
    let peer = |what: String| DistError::Peer { rank: from, what };
    if head.tag != DATA {
        return Err(peer(format!(
            "sent a malformed frame (tag {}) during {} #{seq}",
            head.tag,
            call.name()
        )));
    }
    if head.call != call as u8 || head.seq != seq {
        return Err(peer(format!(
            "is in {} #{} while this rank is in {} #{seq}: the ranks called collectives in different orders",
            Call::name_of(head.call),
            head.seq,
            call.name()
        )));
    }
    if head.len != buf.len() as u64 {
        return Err(peer(format!(
            "sent {} bytes for {} #{seq} where {} were expected: tensor shapes or dtypes differ across ranks",
            head.len,
            call.name(),
            buf.len()
        )));
    }
    s.read_exact(buf).map_err(io)
}

/// Reads and discards until the peer closes its side, fails, or `deadline` passes.
fn drain_until_closed(s: &mut TcpStream, deadline: Instant) {
    let mut sink = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match s.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Names the peer and says what its silence or disconnect most likely means.
fn io_err(peer: usize, call: Call, seq: u64, timeout: Duration, e: io::Error) -> DistError {
    let at = format!("during {} #{seq}", call.name());
    let what = match e.kind() {
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe => {
            format!("closed its connection {at} (it failed, exited or was killed)")
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
            "did not respond within {} s {at}: it hangs or is far behind the others \
             (RECORDS_DIST_TIMEOUT_S raises the limit)",
            timeout.as_secs()
        ),
        _ => format!("connection failed {at}: {e}"),
    };
    DistError::Peer { rank: peer, what }
}

fn hello(rank: usize, world: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&MAGIC);
    b[4..8].copy_from_slice(&VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&(rank as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(world as u32).to_le_bytes());
    b
}

/// Parses a hello: `None` when it is not one of ours, else (version, rank, world).
fn parse_hello(b: &[u8; 16]) -> Option<(u32, usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    (b[..4] == MAGIC).then(|| (word(4), word(8) as usize, word(12) as usize))
}

fn resolve(env: &RankEnv, port: u16) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = (env.master_addr.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("MASTER_ADDR={} does not resolve: {e}", env.master_addr))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("MASTER_ADDR={} has no address", env.master_addr))
}

/// Rank 0: listens and waits until every other rank has said hello, then answers each.
fn accept_all(env: &RankEnv, port: u16) -> Result<Vec<TcpStream>, DistError> {
    let listen_err = |addr: String, why: String| DistError::Listen { addr, why };
    let target = resolve(env, port).map_err(|why| listen_err(env.master_addr.clone(), why))?;
    // Like c10d's TCPStore: a loopback MASTER_ADDR stays on loopback; a host name or address
    // is served on all interfaces, since it may name this host through another interface.
    let ip: IpAddr = match target.ip() {
        ip if ip.is_loopback() => ip,
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let addr = SocketAddr::new(ip, port);
    let listener = TcpListener::bind(addr).map_err(|e| {
        let why = if e.kind() == ErrorKind::AddrInUse {
            format!("port {port} is already in use (another job or a leftover process); pick another MASTER_PORT")
        } else {
            e.to_string()
        };
        listen_err(addr.to_string(), why)
    })?;
    listener.set_nonblocking(true).map_err(|e| listen_err(addr.to_string(), e.to_string()))?;
    let deadline = Instant::now() + env.timeout;
    let mut spokes: Vec<Option<TcpStream>> = (1..env.world).map(|_| None).collect();
    while spokes.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((s, _)) => {
                if let Some((rank, s)) = greet(s, env)? {
                    if spokes[rank - 1].is_some() {
                        return Err(DistError::Peer {
                            rank,
                            what: "joined twice: do two jobs share MASTER_PORT?".to_string(),
                        });
                    }
                    spokes[rank - 1] = Some(s);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<usize> =
                        (1..env.world).filter(|r| spokes[r - 1].is_none()).collect();
                    let list: Vec<String> = missing.iter().map(usize::to_string).collect();
                    return Err(DistError::Peer {
                        rank: missing[0],
                        what: format!(
                            "did not join within {} s (missing ranks: {}): not started, crashed, \
                             or cannot reach {addr}",
                            env.timeout.as_secs(),
                            list.join(", ")
                        ),
                    });
                }
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(listen_err(addr.to_string(), e.to_string())),
        }
    }
    let mut streams: Vec<TcpStream> = spokes.into_iter().flatten().collect();
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(&hello(0, env.world)).map_err(|e| DistError::Peer {
            rank: i + 1,
            what: format!("closed its connection during the rendezvous: {e}"),
        })?;
    }
    Ok(streams)
}

/// Reads a new connection's hello. `Ok(None)` drops a stranger (a port scan, say); a rank of
/// another job shape is an error, because it means two jobs share the port.
fn greet(s: TcpStream, env: &RankEnv) -> Result<Option<(usize, TcpStream)>, DistError> {
    let mut s = s;
    let mut b = [0u8; 16];
    let ok = s.set_nonblocking(false).is_ok()
        && s.set_read_timeout(Some(HELLO_TIMEOUT)).is_ok()
        && s.read_exact(&mut b).is_ok();
    let Some((version, rank, world)) = ok.then(|| parse_hello(&b)).flatten() else {
        return Ok(None);
    };
    let bad = |what: String| Err(DistError::Peer { rank, what });
    if version != VERSION {
        return bad(format!(
            "speaks protocol version {version}, rank 0 speaks {VERSION}: mixed trainer builds"
        ));
    }
    if world != env.world {
        return bad(format!(
            "has world size {world} but rank 0 has {}: do two jobs share MASTER_PORT?",
            env.world
        ));
    }
    if rank == 0 || rank >= env.world {
        return bad(format!("is not a valid rank for world size {}", env.world));
    }
    Ok(Some((rank, s)))
}

/// Ranks other than 0: connects (retrying while rank 0 starts up), says hello, waits for the
/// answer that means every rank has joined.
fn join(env: &RankEnv, port: u16) -> Result<TcpStream, DistError> {
    let shown = format!("{}:{port}", env.master_addr);
    let fail = |why: String| DistError::Connect { rank: env.rank, addr: shown.clone(), why };
    let addr = resolve(env, port).map_err(fail)?;
    let deadline = Instant::now() + env.timeout;
    let mut s = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&addr, left.clamp(Duration::from_millis(1), Duration::from_secs(5))) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                if !matches!(
                    e.kind(),
                    ErrorKind::ConnectionRefused | ErrorKind::TimedOut | ErrorKind::WouldBlock
                ) {
                    return Err(fail(e.to_string()));
                }
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(fail(format!(
                    "no answer within {} s ({e}): rank 0 not started or crashed, or MASTER_ADDR/MASTER_PORT are wrong",
                    env.timeout.as_secs()
                )))
            }
        }
    };
    let closed = |e: io::Error| DistError::Peer {
        rank: 0,
        what: if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            format!(
                "did not confirm the rendezvous within {} s: some other rank never joined",
                env.timeout.as_secs()
            )
        } else {
            format!(
                "closed the connection during the rendezvous ({e}): it failed or rejected this \
                 rank; see its error"
            )
        },
    };
    s.write_all(&hello(env.rank, env.world)).map_err(closed)?;
    let left = deadline.saturating_duration_since(Instant::now());
    // Rank 0 answers once all ranks joined, or gives up after its own `timeout`.
    s.set_read_timeout(Some(left + env.timeout)).map_err(|e| fail(e.to_string()))?;
    let mut b = [0u8; 16];
    s.read_exact(&mut b).map_err(closed)?;
    match parse_hello(&b) {
        Some((VERSION, 0, world)) if world == env.world => Ok(s),
        _ => Err(fail(format!(
            "{shown} answered, but not as rank 0 of a {}-rank job: is another service on that port?",
            env.world
        ))),
    }
}
