/*
 * taps: what stock usrsctp's public API cannot do: put a second peer address (a second
 * path) on an established AF_CONN association; count a stream's unsent bytes; and IP mode,
 * associations over real addresses through UDP sockets taps owns, with an output hook that
 * chooses each packet's source address and counts it, and a wait for usrsctp's iterator
 * thread (taps_ip_*, at the end).
 * Plus a fingerprint of the library this file was compiled for.
 *
 * Compiled by crates/usrsctp/build.rs against the internal headers of exactly the installed
 * Debian libusrsctp version (fetched by scripts/deps.sh), with the defines that library was
 * built with. It reaches into internal structures (socket -> endpoint -> association), so it
 * is only valid for that build: the Rust side calls taps_mh_add_peer only after comparing
 * taps_mh_loaded_build_id with the build id recorded at compile time (TAPS_MH_BUILD_ID).
 *
 * Every call must hold the crate's process-wide usrsctp lock (one thread inside usrsctp),
 * and taps_mh_bind must have succeeded first.
 */
#include <errno.h>
#include <string.h>
#include <dlfcn.h>
#include <link.h>
#include <elf.h>

#include <netinet/sctp_os.h>
#include <netinet/sctp_var.h>
#include <netinet/sctp_pcb.h>
#include <netinet/sctputil.h>
#include <netinet/sctp_output.h>
#include <netinet/sctp_timer.h>
#include <netinet/sctp_input.h>
#include <netinet/sctp_bsd_addr.h>
#include <user_socketvar.h>

#include <sys/mman.h>
#include <unistd.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>

/*
 * The library's internal functions this file calls, looked up by taps_mh_bind in the handle
 * the Rust side loaded libusrsctp with (programs load it only when SCTP is first used, so
 * nothing here may refer to the library at link time). Each name below stands for its
 * pointer from here on.
 */
#define TAPS_MH_FUNCTIONS(X) \
	X(sctp_find_ifa_by_addr) \
	X(sctp_add_local_addr_ep) \
	X(sctp_del_local_addr_restricted) \
	X(sctp_findnet) \
	X(sctp_add_remote_addr) \
	X(sctp_timer_start) \
	X(sctp_send_hb) \
	X(sctp_chunk_output) \
	X(sctp_get_mbuf_for_msg) \
	X(m_copyback) \
	X(m_pullup) \
	X(m_freem) \
	X(sctp_common_input_processing) \
	X(sctp_initiate_iterator) \
	X(sctp_wakeup_iterator)
#define TAPS_MH_POINTER(f) static __typeof__(f) *taps_mh_p_##f;
TAPS_MH_FUNCTIONS(TAPS_MH_POINTER)
#define sctp_find_ifa_by_addr (*taps_mh_p_sctp_find_ifa_by_addr)
#define sctp_add_local_addr_ep (*taps_mh_p_sctp_add_local_addr_ep)
#define sctp_del_local_addr_restricted (*taps_mh_p_sctp_del_local_addr_restricted)
#define sctp_findnet (*taps_mh_p_sctp_findnet)
#define sctp_add_remote_addr (*taps_mh_p_sctp_add_remote_addr)
#define sctp_timer_start (*taps_mh_p_sctp_timer_start)
#define sctp_send_hb (*taps_mh_p_sctp_send_hb)
#define sctp_chunk_output (*taps_mh_p_sctp_chunk_output)
#define sctp_get_mbuf_for_msg (*taps_mh_p_sctp_get_mbuf_for_msg)
#define m_copyback (*taps_mh_p_m_copyback)
#define m_pullup (*taps_mh_p_m_pullup)
#define m_freem (*taps_mh_p_m_freem)
#define sctp_common_input_processing (*taps_mh_p_sctp_common_input_processing)
#define sctp_initiate_iterator (*taps_mh_p_sctp_initiate_iterator)
#define sctp_wakeup_iterator (*taps_mh_p_sctp_wakeup_iterator)

/* The library's global state (`system_base_info`, what SCTP_BASE_VAR names), looked up like
 * the functions: IP mode writes the two tunnelling socket slots in it. */
static struct sctp_base_info *taps_mh_base;

/*
 * Looks up the functions above in `handle` (from dlopen of libusrsctp). Returns 0, or -1 when
 * one is missing (then no other function of this file may be called). Called once, before
 * any other.
 */
int taps_mh_bind(void *handle)
{
#define TAPS_MH_LOOKUP(f) \
	taps_mh_p_##f = (__typeof__(taps_mh_p_##f))dlsym(handle, #f); \
	if (taps_mh_p_##f == NULL) \
		return -1;
	TAPS_MH_FUNCTIONS(TAPS_MH_LOOKUP)
#undef TAPS_MH_LOOKUP
	taps_mh_base = (struct sctp_base_info *)dlsym(handle, "system_base_info");
	if (taps_mh_base == NULL)
		return -1;
	return 0;
}

/* Most peer paths one association may get through this shim. */
#define TAPS_MH_MAX_PATHS 8

/*
 * AF_CONN input uses one conn address as both source and destination, so a packet of the new
 * path arrives "to" `conn` too. An endpoint bound to one conn address (a client socket)
 * only accepts packets to its bound addresses: make `conn` one of them, usable by this
 * association at once (not restricted, as an address awaiting ASCONF would be). An endpoint
 * bound to all addresses (a listener's) already owns every registered conn address.
 * Returns 0 or EADDRNOTAVAIL (`conn` is not a registered address).
 */
static int taps_mh_own_local(struct sctp_inpcb *inp, struct sctp_tcb *stcb,
                             struct sockaddr_conn *conn)
{
	struct sctp_ifa *ifa;

	if (inp->sctp_flags & SCTP_PCB_FLAGS_BOUNDALL)
		return 0;
	ifa = sctp_find_ifa_by_addr((struct sockaddr *)conn, stcb->asoc.vrf_id,
	                            SCTP_ADDR_NOT_LOCKED);
	if (ifa == NULL)
		return EADDRNOTAVAIL;
	sctp_add_local_addr_ep(inp, ifa, 0);
	sctp_del_local_addr_restricted(stcb, ifa);
	return 0;
}

/*
 * Adds the AF_CONN peer address `conn` (an opaque id; the output callback later receives it
 * for packets on this path) to the association of the one-to-one socket `so`. The new path
 * starts UNCONFIRMED; a HEARTBEAT is sent on it at once and the path carries data only after
 * the peer's HEARTBEAT-ACK returns the nonce. What ASCONF ADD-IP does for IP addresses.
 * Returns 0 or an errno: ENOTCONN (no established association), EALREADY (already a path),
 * ENOSPC (TAPS_MH_MAX_PATHS reached), EINVAL (socket gone), EADDRNOTAVAIL (`conn` is not a
 * registered conn address), ENOBUFS (usrsctp refused).
 */
int taps_mh_add_peer(struct socket *so, void *conn)
{
	struct sctp_inpcb *inp;
	struct sctp_tcb *stcb;
	struct sctp_nets *net = NULL;
	struct sockaddr_conn peer;
	int rc = 0;

	if (so == NULL || conn == NULL)
		return EINVAL;
	inp = (struct sctp_inpcb *)so->so_pcb;
	if (inp == NULL)
		return EINVAL;
	SCTP_INP_RLOCK(inp);
	if (inp->sctp_flags & SCTP_PCB_FLAGS_SOCKET_GONE) {
		SCTP_INP_RUNLOCK(inp);
		return EINVAL;
	}
	stcb = LIST_FIRST(&inp->sctp_asoc_list);
	if (stcb != NULL)
		SCTP_TCB_LOCK(stcb);
	SCTP_INP_RUNLOCK(inp);
	if (stcb == NULL)
		return ENOTCONN;
	if (SCTP_GET_STATE(stcb) != SCTP_STATE_OPEN) {
		/* Before COOKIE-ECHO/ACK the INIT-ACK processing would purge an extra net. */
		SCTP_TCB_UNLOCK(stcb);
		return ENOTCONN;
	}
	memset(&peer, 0, sizeof(peer));
	peer.sconn_family = AF_CONN;
	peer.sconn_port = stcb->rport;
	peer.sconn_addr = conn;
	if (sctp_findnet(stcb, (struct sockaddr *)&peer) != NULL) {
		rc = EALREADY;
	} else if (stcb->asoc.numnets >= TAPS_MH_MAX_PATHS) {
		rc = ENOSPC;
	} else if ((rc = taps_mh_own_local(inp, stcb, &peer)) != 0) {
		/* rc set */
	} else if (sctp_add_remote_addr(stcb, (struct sockaddr *)&peer, &net, stcb->asoc.port,
	                                SCTP_DONOT_SETSCOPE, SCTP_ADDR_DYNAMIC_ADDED) != 0 ||
	           net == NULL) {
		rc = ENOBUFS;
	} else {
		/* Path MTU raising and heartbeats as for any other path; the first heartbeat now,
		 * so the path is confirmed within one round trip instead of one interval. */
		sctp_timer_start(SCTP_TIMER_TYPE_PATHMTURAISE, inp, stcb, net);
		sctp_timer_start(SCTP_TIMER_TYPE_HEARTBEAT, inp, stcb, net);
		sctp_send_hb(stcb, net, SCTP_SO_LOCKED);
		sctp_chunk_output(inp, stcb, SCTP_OUTPUT_FROM_HB_TMR, SCTP_SO_LOCKED);
	}
	SCTP_TCB_UNLOCK(stcb);
	return rc;
}

struct taps_mh_find {
	const void *base;
	unsigned char *out;
	size_t cap;
	int len;
};

static int taps_mh_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct taps_mh_find *f = arg;
	(void)size;
	if ((const void *)info->dlpi_addr != f->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		const unsigned char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			size_t name = (nh->n_namesz + 3u) & ~3u;
			size_t desc = (nh->n_descsz + 3u) & ~3u;
			const unsigned char *d = p + sizeof(ElfW(Nhdr)) + name;
			if (d + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(p + sizeof(ElfW(Nhdr)), "GNU", 4) == 0) {
				size_t n = nh->n_descsz < f->cap ? nh->n_descsz : f->cap;
				memcpy(f->out, d, n);
				f->len = (int)n;
				return 1;
			}
			p = d + desc;
		}
	}
	return 1;
}

/*
 * Copies the GNU build id of the loaded library that defines sctp_findnet (libusrsctp) into `out` (at
 * most `cap` bytes). Returns its length, or -1 when it cannot be found. Walks the loaded
 * objects once (dladdr + dl_iterate_phdr): microseconds, called once per process.
 */
int taps_mh_loaded_build_id(unsigned char *out, size_t cap)
{
	Dl_info di;
	struct taps_mh_find f;

	if (taps_mh_p_sctp_findnet == NULL)
		return -1;
	if (dladdr((void *)taps_mh_p_sctp_findnet, &di) == 0 || di.dli_fbase == NULL)
		return -1;
	/* dli_fbase is the load address; dl_iterate_phdr reports the load bias, which equals
	 * it for shared objects linked at address 0 (all of Debian's). */
	f.base = di.dli_fbase;
	f.out = out;
	f.cap = cap;
	f.len = -1;
	dl_iterate_phdr(taps_mh_phdr, &f);
	return f.len;
}

/*
 * Bytes of stream `sid` still waiting in the send buffer of the association of `so`: what
 * the stream queue holds (messages not yet cut into chunks) plus the chunks on the send
 * queue (cut, not yet sent). In-flight chunks are not counted. What the "sender queue
 * info" of draft-dreibholz-tsvwg-sctpsocket-sqinfo reports per stream. Returns the count,
 * or -ENOTCONN (no association), -EINVAL (socket gone, no such stream).
 */
long taps_mh_stream_queued(struct socket *so, unsigned int sid)
{
	struct sctp_inpcb *inp;
	struct sctp_tcb *stcb;
	struct sctp_stream_queue_pending *sp;
	struct sctp_tmit_chunk *chk;
	long sum = 0;

	if (so == NULL)
		return -EINVAL;
	inp = (struct sctp_inpcb *)so->so_pcb;
	if (inp == NULL)
		return -EINVAL;
	SCTP_INP_RLOCK(inp);
	if (inp->sctp_flags & SCTP_PCB_FLAGS_SOCKET_GONE) {
		SCTP_INP_RUNLOCK(inp);
		return -EINVAL;
	}
	stcb = LIST_FIRST(&inp->sctp_asoc_list);
	if (stcb != NULL)
		SCTP_TCB_LOCK(stcb);
	SCTP_INP_RUNLOCK(inp);
	if (stcb == NULL)
		return -ENOTCONN;
	if (sid >= stcb->asoc.streamoutcnt || stcb->asoc.strmout == NULL) {
		SCTP_TCB_UNLOCK(stcb);
		return -EINVAL;
	}
	TAILQ_FOREACH(sp, &stcb->asoc.strmout[sid].outqueue, next)
		sum += sp->length;
	TAILQ_FOREACH(chk, &stcb->asoc.send_queue, sctp_next)
		if (chk->rec.data.sid == sid)
			sum += chk->send_size;
	SCTP_TCB_UNLOCK(stcb);
	return sum;
}

/*
 * IP mode: associations over real IPv4/IPv6 addresses, UDP-encapsulated (RFC 6951), with the
 * UDP sockets owned by taps instead of usrsctp's receive threads (which the crate never
 * starts: it initialises usrsctp without threads).
 *
 * taps_ip_set_sockets puts taps' two UDP sockets (bound to the process's tunnelling port) in
 * the slots usrsctp's IP output sends encapsulated packets from; -1 leaves a family without
 * one (its packets are dropped, as usrsctp does when it has no socket).
 */
void taps_ip_set_sockets(int fd4, int fd6)
{
	taps_mh_base->userspace_udpsctp = fd4;
	taps_mh_base->userspace_udpsctp6 = fd6;
}

/*
 * Hands one SCTP packet that arrived UDP-encapsulated to usrsctp: `buf` is the UDP payload,
 * `from` the sender's address with its UDP port (the port usrsctp answers to on that path),
 * `to` our address it was sent to (IP_PKTINFO), of the same family. What usrsctp's own
 * receive thread does per datagram (user_recv_thread.c, recv_function_udp), minus the
 * receive. The CRC32c must have been checked by the caller. Must hold the crate's usrsctp
 * lock. Returns 0, or -1 when the packet was dropped before SCTP saw it (too short, wrong
 * family, no memory).
 */
int taps_ip_input(const void *buf, size_t length, const struct sockaddr *from,
                  const struct sockaddr *to)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} src, dst;
	struct mbuf *m, *mm;
	struct sctphdr *sh;
	struct sctp_chunkhdr *ch;
	int remaining, offset;
	uint16_t port;

	if (length < sizeof(struct sctphdr) + sizeof(struct sctp_chunkhdr) ||
	    length > 65535 || from->sa_family != to->sa_family)
		return -1;
	memset(&src, 0, sizeof(src));
	memset(&dst, 0, sizeof(dst));
	if (from->sa_family == AF_INET) {
		memcpy(&src.sin, from, sizeof(struct sockaddr_in));
		memcpy(&dst.sin, to, sizeof(struct sockaddr_in));
		port = src.sin.sin_port;
	} else if (from->sa_family == AF_INET6) {
		memcpy(&src.sin6, from, sizeof(struct sockaddr_in6));
		memcpy(&dst.sin6, to, sizeof(struct sockaddr_in6));
		port = src.sin6.sin6_port;
	} else {
		return -1;
	}
	if ((m = sctp_get_mbuf_for_msg((unsigned int)length, 1, M_NOWAIT, 0, MT_DATA)) == NULL)
		return -1;
	remaining = (int)length;
	for (mm = m; mm != NULL; mm = mm->m_next) {
		mm->m_len = min((int)M_SIZE(mm), remaining);
		m->m_pkthdr.len += mm->m_len;
		remaining -= mm->m_len;
	}
	m_copyback(m, 0, (int)length, (caddr_t)buf);
	offset = sizeof(struct sctphdr) + sizeof(struct sctp_chunkhdr);
	if (SCTP_BUF_LEN(m) < offset) {
		if ((m = m_pullup(m, offset)) == NULL)
			return -1;
	}
	sh = mtod(m, struct sctphdr *);
	ch = (struct sctp_chunkhdr *)((caddr_t)sh + sizeof(struct sctphdr));
	offset -= sizeof(struct sctp_chunkhdr);
	if (from->sa_family == AF_INET) {
		src.sin.sin_port = sh->src_port;
		dst.sin.sin_port = sh->dest_port;
	} else {
		src.sin6.sin6_port = sh->src_port;
		dst.sin6.sin6_port = sh->dest_port;
	}
	sctp_common_input_processing(&m, 0, offset, (int)length, &src.sa, &dst.sa, sh, ch,
	                             0, 0, SCTP_DEFAULT_VRFID, port);
	if (m != NULL)
		m_freem(m);
	return 0;
}

/*
 * usrsctp's iterator thread does what usrsctp_bindx queues on an endpoint that has
 * associations: it queues and sends the ASCONF of an added or removed address and, for a
 * removal, takes the address off the endpoint (sctp_addr_mgmt_ep_sa, sctp_asconf_iterator_*).
 * The thread waits for work with pthread_cond_wait without looking at its queue first
 * (sctp_iterator_thread), so work queued before it first waits (usrsctp_init starts it, and
 * on a busy machine it may not have run yet) stays queued until more work is queued.
 *
 * taps_ip_iterator_mark queues, behind whatever is already queued (the thread takes its
 * queue in order), a call of `done(arg, 0)` on that thread, visiting none of the endpoint's
 * associations; usrsctp makes the call even when the socket is closed first. Returns 0 or
 * an errno: EINVAL (socket gone), ESRCH (usrsctp has no iterator thread), ENOMEM.
 * taps_ip_iterator_kick wakes the thread if it is waiting (a spurious wake-up costs it one
 * look at an empty queue).
 */
static int taps_ip_iterator_skip(struct sctp_inpcb *inp, void *ptr, uint32_t val)
{
	(void)inp;
	(void)ptr;
	(void)val;
	return 1;
}

static void taps_ip_iterator_none(struct sctp_inpcb *inp, struct sctp_tcb *stcb, void *ptr,
                                  uint32_t val)
{
	(void)inp;
	(void)stcb;
	(void)ptr;
	(void)val;
}

int taps_ip_iterator_mark(struct socket *so, void (*done)(void *, uint32_t), void *arg)
{
	struct sctp_inpcb *inp;
	int gone;

	if (so == NULL || done == NULL)
		return EINVAL;
	if (!taps_mh_base->iterator_thread_started)
		return ESRCH;
	inp = (struct sctp_inpcb *)so->so_pcb;
	if (inp == NULL)
		return EINVAL;
	SCTP_INP_RLOCK(inp);
	gone = (inp->sctp_flags & SCTP_PCB_FLAGS_SOCKET_GONE) != 0;
	SCTP_INP_RUNLOCK(inp);
	if (gone)
		return EINVAL;
	if (sctp_initiate_iterator(taps_ip_iterator_skip, taps_ip_iterator_none, NULL,
	                           SCTP_PCB_ANY_FLAGS, SCTP_PCB_ANY_FEATURES, SCTP_ASOC_ANY_STATE,
	                           arg, 0, done, inp, 1) != 0)
		return ENOMEM;
	return 0;
}

void taps_ip_iterator_kick(void)
{
	sctp_wakeup_iterator();
}

/*
 * IP mode's output hook. usrsctp sends each encapsulated packet with sendmsg() on a
 * tunnelling socket, after stripping the IPv4/IPv6 and UDP headers it built, with no control
 * data (sctp_userspace_ip_output and sctp_userspace_ip6_output, user_socket.c), so the kernel
 * picks the source address by routing. A peer answers a packet from an address the
 * association never listed with an ABORT, and usrsctp's own choice (in the stripped header)
 * knows nothing of routing. taps_ip_hook_output points libusrsctp's own GOT slot for sendmsg
 * at taps_ip_sendmsg, which asks `taps_ip_source_cb` for the source of each tunnelled packet
 * (IP_PKTINFO / IPV6_PKTINFO when it names one; none at all when the association lists no
 * address to send it from) and reports what was sent to `taps_ip_sent_cb` for the per-path
 * byte counters. Other sendmsg calls of the library pass
 * through unchanged.
 */
struct taps_ip_packet {
	int family;                /* AF_INET or AF_INET6 */
	unsigned char chosen[16];  /* the source address usrsctp chose (4 bytes for IPv4) */
	unsigned char remote[16];  /* the destination address */
	uint16_t local_sctp_port;  /* host order, from the SCTP common header */
	uint16_t remote_sctp_port;
	int asconf;                /* whether it carries an ASCONF chunk */
	size_t len;                /* bytes of the SCTP packet */
};
/* 1 with the address to send from in `source` (the family's length); 0: routing picks; -1:
 * not sent (the association lists no address to send it from). */
typedef int (*taps_ip_source_fn)(const struct taps_ip_packet *, unsigned char *source);
/* A packet sent. */
typedef void (*taps_ip_sent_fn)(const struct taps_ip_packet *);

static ssize_t (*taps_ip_real_sendmsg)(int, const struct msghdr *, int);
static taps_ip_source_fn taps_ip_source_cb;
static taps_ip_sent_fn taps_ip_sent_cb;

/* Where the headers usrsctp stripped are: m_adj() either moved the first mbuf's data past
 * them (they sit just before it) or, when that mbuf held nothing else, emptied it in place
 * (they sit at its start). */
static const unsigned char *taps_ip_stripped(const struct msghdr *msg, size_t hlen)
{
	const struct iovec *iov = &msg->msg_iov[0];
	if (iov->iov_len == 0)
		return iov->iov_base;
	return (const unsigned char *)iov->iov_base - hlen;
}

/* Copies up to `n` first bytes of the packet, gathered across the iovecs; returns how many. */
static size_t taps_ip_head(const struct msghdr *msg, unsigned char *out, size_t n)
{
	size_t got = 0;
	for (size_t i = 0; i < (size_t)msg->msg_iovlen && got < n; i++) {
		size_t take = msg->msg_iov[i].iov_len < n - got ? msg->msg_iov[i].iov_len : n - got;
		memcpy(out + got, msg->msg_iov[i].iov_base, take);
		got += take;
	}
	return got;
}

/* Whether one of the chunks that start in the first `n` bytes of an SCTP packet is an
 * ASCONF (0xc1; usrsctp bundles it behind an AUTH chunk). */
static int taps_ip_carries_asconf(const unsigned char *pkt, size_t n)
{
	size_t off = 12;	/* the common header */
	while (off + 4 <= n) {
		size_t len = ((size_t)pkt[off + 2] << 8) | pkt[off + 3];
		if (pkt[off] == 0xc1)
			return 1;
		if (len < 4)
			break;
		off += (len + 3) & ~(size_t)3;
	}
	return 0;
}

/* Fills `p` from a tunnelled packet of `msg` (the headers usrsctp stripped, checked against
 * the destination): 0, or -1 when `msg` is not laid out as usrsctp's IP output sends. */
static int taps_ip_describe(const struct msghdr *msg, int v6, struct taps_ip_packet *p)
{
	unsigned char sctp[128];
	size_t head;

	memset(p, 0, sizeof(*p));
	if (!v6) {
		const struct sockaddr_in *to = msg->msg_name;
		const struct ip *ip = (const struct ip *)taps_ip_stripped(
		    msg, sizeof(struct ip) + sizeof(struct udphdr));
		const struct udphdr *udp = (const struct udphdr *)(ip + 1);
		if (msg->msg_namelen < sizeof(*to) || to->sin_family != AF_INET || ip->ip_v != 4 ||
		    ip->ip_hl != 5 || ip->ip_p != IPPROTO_UDP ||
		    ip->ip_dst.s_addr != to->sin_addr.s_addr || udp->uh_dport != to->sin_port)
			return -1;
		p->family = AF_INET;
		memcpy(p->chosen, &ip->ip_src, 4);
		memcpy(p->remote, &to->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *to = msg->msg_name;
		const struct ip6_hdr *ip6 = (const struct ip6_hdr *)taps_ip_stripped(
		    msg, sizeof(struct ip6_hdr) + sizeof(struct udphdr));
		const struct udphdr *udp = (const struct udphdr *)(ip6 + 1);
		if (msg->msg_namelen < sizeof(*to) || to->sin6_family != AF_INET6 ||
		    (ip6->ip6_vfc >> 4) != 6 || ip6->ip6_nxt != IPPROTO_UDP ||
		    memcmp(&ip6->ip6_dst, &to->sin6_addr, 16) != 0 || udp->uh_dport != to->sin6_port)
			return -1;
		p->family = AF_INET6;
		memcpy(p->chosen, &ip6->ip6_src, 16);
		memcpy(p->remote, &to->sin6_addr, 16);
	}
	head = taps_ip_head(msg, sctp, sizeof(sctp));
	if (head < 12)
		return -1;
	p->local_sctp_port = (uint16_t)((sctp[0] << 8) | sctp[1]);
	p->remote_sctp_port = (uint16_t)((sctp[2] << 8) | sctp[3]);
	p->asconf = taps_ip_carries_asconf(sctp, head);
	return 0;
}

/* Fills `c` with one control message (`level`, `type`, `len` bytes of `data`); returns the
 * control length. */
static size_t taps_ip_cmsg(struct cmsghdr *c, int level, int type, const void *data, size_t len)
{
	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(c), data, len);
	return CMSG_SPACE(len);
}

/* Fills `c` with IP_PKTINFO or IPV6_PKTINFO asking for the source `source` (4 or 16 bytes);
 * returns the control length. */
static size_t taps_ip_pktinfo(struct cmsghdr *c, int v6, const unsigned char *source)
{
	struct in_pktinfo pi;
	struct in6_pktinfo pi6;

	if (v6) {
		memset(&pi6, 0, sizeof(pi6));
		memcpy(&pi6.ipi6_addr, source, 16);
		return taps_ip_cmsg(c, IPPROTO_IPV6, IPV6_PKTINFO, &pi6, sizeof(pi6));
	}
	memset(&pi, 0, sizeof(pi));
	memcpy(&pi.ipi_spec_dst, source, 4);
	return taps_ip_cmsg(c, IPPROTO_IP, IP_PKTINFO, &pi, sizeof(pi));
}

static ssize_t taps_ip_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} ctl;
	struct taps_ip_packet p;
	struct msghdr with = *msg;
	struct cmsghdr *c = (struct cmsghdr *)ctl.buf;
	unsigned char source[16];
	int chosen, v6;
	ssize_t n;

	if (taps_mh_base == NULL || msg->msg_iovlen < 1 || msg->msg_control != NULL ||
	    msg->msg_name == NULL ||
	    (fd != taps_mh_base->userspace_udpsctp && fd != taps_mh_base->userspace_udpsctp6))
		return taps_ip_real_sendmsg(fd, msg, flags);
	v6 = fd == taps_mh_base->userspace_udpsctp6;
	if (taps_ip_describe(msg, v6, &p) != 0)
		return taps_ip_real_sendmsg(fd, msg, flags);
	memset(&ctl, 0, sizeof(ctl));
	chosen = taps_ip_source_cb != NULL ? taps_ip_source_cb(&p, source) : 0;
	if (chosen < 0) {
		/* usrsctp moves the data of a packet it could not send this way to another path
		 * (sctp_move_chunks_from_net). */
		errno = EHOSTUNREACH;
		return -1;
	}
	if (chosen == 1) {
		with.msg_control = ctl.buf;
		with.msg_controllen = taps_ip_pktinfo(c, v6, source);
	}
	n = taps_ip_real_sendmsg(fd, &with, flags);
	/* The source is no longer one of this host's addresses: let routing pick one. */
	if (n < 0 && chosen && (errno == EINVAL || errno == EADDRNOTAVAIL)) {
		chosen = 0;
		n = taps_ip_real_sendmsg(fd, msg, flags);
	}
	if (n >= 0 && taps_ip_sent_cb != NULL) {
		p.len = (size_t)n;
		taps_ip_sent_cb(&p);
	}
	return n;
}

struct taps_ip_slot {
	const void *base;
	void **slot;          /* the GOT entry of sendmsg */
	uintptr_t relro[2];   /* the object's RELRO range, [start, end) */
};

/* Finds libusrsctp's GOT entry for sendmsg (a JUMP_SLOT or GLOB_DAT relocation) and its
 * RELRO range, from its dynamic section. */
static int taps_ip_find_slot(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct taps_ip_slot *s = arg;
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *rel[2] = {NULL, NULL};
	size_t relsz[2] = {0, 0};
	uintptr_t base = info->dlpi_addr;
	(void)size;
	if ((const void *)base != s->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			s->relro[0] = base + ph->p_vaddr;
			s->relro[1] = base + ph->p_vaddr + ph->p_memsz;
		}
	}
	if (dyn == NULL)
		return 1;
	/* The dynamic linker rewrites these to run-time addresses in place on most targets;
	 * where it does not, they are offsets from the load address. */
#define TAPS_IP_PTR(v) ((uintptr_t)(v) < base ? base + (uintptr_t)(v) : (uintptr_t)(v))
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)TAPS_IP_PTR(dyn->d_un.d_ptr); break;
		case DT_STRTAB: strtab = (const char *)TAPS_IP_PTR(dyn->d_un.d_ptr); break;
		case DT_JMPREL: rel[0] = (const ElfW(Rela) *)TAPS_IP_PTR(dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: relsz[0] = dyn->d_un.d_val; break;
		case DT_RELA: rel[1] = (const ElfW(Rela) *)TAPS_IP_PTR(dyn->d_un.d_ptr); break;
		case DT_RELASZ: relsz[1] = dyn->d_un.d_val; break;
		default: break;
		}
	}
#undef TAPS_IP_PTR
	if (symtab == NULL || strtab == NULL)
		return 1;
	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; rel[t] != NULL && i < relsz[t] / sizeof(ElfW(Rela)); i++) {
			const ElfW(Rela) *r = &rel[t][i];
			unsigned long type = ELF64_R_TYPE(r->r_info);
			size_t sym = ELF64_R_SYM(r->r_info);
#if defined(__x86_64__)
			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
				continue;
#elif defined(__aarch64__)
			if (type != R_AARCH64_JUMP_SLOT && type != R_AARCH64_GLOB_DAT)
				continue;
#else
			continue;
#endif
			if (sym != 0 && strcmp(strtab + symtab[sym].st_name, "sendmsg") == 0) {
				s->slot = (void **)(base + r->r_offset);
				return 1;
			}
		}
	}
	return 1;
}

/*
 * Installs the output hook described above, with its two callbacks. Returns 0, or -1 when
 * libusrsctp's GOT entry for sendmsg cannot be found or written (then usrsctp sends as
 * before, the kernel picking every source, and nothing is counted). Called once per process,
 * when IP mode starts, after taps_ip_set_sockets.
 */
int taps_ip_hook_output(taps_ip_source_fn source, taps_ip_sent_fn sent)
{
	Dl_info di;
	struct taps_ip_slot s;
	uintptr_t page;
	long pagesize = sysconf(_SC_PAGESIZE);
	void *real;

	if (taps_mh_p_sctp_findnet == NULL || pagesize <= 0)
		return -1;
	if (dladdr((void *)taps_mh_p_sctp_findnet, &di) == 0 || di.dli_fbase == NULL)
		return -1;
	real = dlsym(RTLD_DEFAULT, "sendmsg");
	if (real == NULL)
		return -1;
	memset(&s, 0, sizeof(s));
	s.base = di.dli_fbase;
	dl_iterate_phdr(taps_ip_find_slot, &s);
	if (s.slot == NULL)
		return -1;
	taps_ip_real_sendmsg = (ssize_t (*)(int, const struct msghdr *, int))real;
	taps_ip_source_cb = source;
	taps_ip_sent_cb = sent;
	page = (uintptr_t)s.slot & ~((uintptr_t)pagesize - 1);
	if (mprotect((void *)page, (size_t)pagesize, PROT_READ | PROT_WRITE) != 0)
		return -1;
	__atomic_store_n(s.slot, (void *)taps_ip_sendmsg, __ATOMIC_SEQ_CST);
	/* Read-only again where the dynamic linker had made it so: the RELRO pages, up to the
	 * last whole one. */
	if (page >= (s.relro[0] & ~((uintptr_t)pagesize - 1)) &&
	    page + (uintptr_t)pagesize <= (s.relro[1] & ~((uintptr_t)pagesize - 1)))
		mprotect((void *)page, (size_t)pagesize, PROT_READ);
	return 0;
}
