// netrepro-sim: one trial of a netrepro experiment in ns-3 (3.44, the PyPI `ns3` wheel's C++
// libraries), writing the raw files the emulated sites write, so that one analysis reads both.
//
// Usage: netrepro-sim SCENARIO OUTDIR
// SCENARIO is a text file written by netrepro/sites/ns3.py (one directive per line, fields
// separated by spaces; `#` starts a comment):
//
//   epoch0 E                      Unix time (s) of simulated time 0 (time stamps in the files)
//   run K                         ns-3's run number (RngRun): repetition K draws other random numbers
//   stop T                        simulated seconds to run
//   tcp TYPEID MSS MINRTO_S INITCWND SNDBUF RCVBUF
//   default NAME VALUE            Config::SetDefault (any attribute, e.g. ns3::TcpSocketBase::Sack true)
//   node NAME
//   link A B RATE_BPS DELAY_S DEVQUEUE_PKTS   point-to-point link; each end's device is "A>B", "B>A"
//   qdisc NODE PEER TYPEID [ATTR=VALUE ...]  root queue disc on NODE's device toward PEER
//   sample NODE PEER INTERVAL_S START_S STOP_S PATH DEVNAME HANDLE KIND [classes]
//                                 qdisc.jsonl lines as netrepro's sampler writes them (tc -s -j)
//   ping NODE TARGET LABEL INTERVAL_S START_S STOP_S PATH
//                                 ping -D -O lines (LABEL: the address the file names)
//   congestion NODE TYPEID        the node's TCP congestion control (its sysctl), for every socket
//                                 it opens that does not choose its own
//   flows SERVER CLIENT LABEL N START_S STOP_S RATE_BPS PATH
//                                 N TCP flows SERVER -> CLIENT (a download), each to its own port,
//                                 rate-limited at RATE_BPS of payload (0: unlimited); a line per
//                                 flow appended to PATH at its end, as roles/flow_clients writes
//                                 (data_start_s: the first byte's arrival after the flow's start)
//
//   iperf3 CLIENT SERVER ID STREAMS START_S OMIT_S DURATION_S INTERVAL_S CC SNDBUF RCVBUF PACING
//          MAXRATE_BPS SACK PATH
//                                 an iperf3 test (iperf3 -c -P STREAMS -O OMIT -t DURATION -i INTERVAL
//                                 -J): STREAMS bulk TCP streams CLIENT -> SERVER, with congestion
//                                 control CC (a TypeId, or - for the node's), the sender's send and the
//                                 receiver's receive buffer (bytes), pacing 1|0 at most MAXRATE_BPS
//                                 (0: no cap), SACK 1|0; the report written to PATH as iperf3 -J
//                                 writes it, and the client's start time to PATH.t0
//   sample ... KIND [classes]     with the word `classes`: the queue disc's classes too, as
//                                 `tc -s class show` prints them
//
// Addresses: every link gets its own /30 (10.x.y.z); the experiment's addresses are labels in
// the files only. Routes: ns-3's global routing (shortest paths).
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-apps-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

// --- TcpTxBuffer::NextSeg without a scan when nothing is lost ----------------------------------
// ns-3 3.44's TcpTxBuffer::NextSeg (RFC 6675) walks the whole sent list for every segment it
// sends, looking for a lost one (rule 1) or, in recovery, the first one neither retransmitted
// nor SACKed (rule 3): a flow with W segments in flight costs O(W) per segment, and Lab 19's
// drop tail at 1 Gbit/s (W about 17,000) took 58 s of CPU per simulated second. When no byte
// is marked lost (m_lostOut == 0, the count the buffer keeps of its lost flags) and the
// socket is not in recovery, neither rule can return anything, so the walk is skipped and
// rule 2 (new data, within the receiver's window) is answered at once. Every other call goes
// to ns-3's own NextSeg (dlsym RTLD_NEXT: this definition interposes the library's, whose
// callers reach it through the PLT; netrepro-sim is linked with -rdynamic so that it does).
// With NETREPRO_SIM_CHECK=1 in the environment, every fast answer is compared with ns-3's and
// a difference stops the simulation (exit 3): tests/test_site_ns3.py runs a lab so.
namespace ns3
{
bool
TcpTxBuffer::NextSeg(SequenceNumber32* seq, SequenceNumber32* seqHigh, bool isRecovery) const
{
    using Original = bool (*)(const TcpTxBuffer*, SequenceNumber32*, SequenceNumber32*, bool);
    static const Original original = reinterpret_cast<Original>(
        dlsym(RTLD_NEXT, "_ZNK3ns311TcpTxBuffer7NextSegEPNS_14SequenceNumberIjiEES3_b"));
    static const bool check = std::getenv("NETREPRO_SIM_CHECK") != nullptr;
    if (original == nullptr)
    {
        std::cerr << "netrepro-sim: ns-3's TcpTxBuffer::NextSeg not found" << std::endl;
        std::exit(3);
    }
    if (m_lostOut > 0 || isRecovery)
        return original(this, seq, seqHigh, isRecovery);
    // rule 2: unsent data, and the receiver's window open beyond what is in flight
    bool found = false;
    SequenceNumber32 s, high;
    if (SizeFromSequence(m_firstByteSeq + m_sentSize) > 0 && m_sentSize < m_rWndCallback())
    {
        found = true;
        s = m_firstByteSeq + m_sentSize;
        high = s + std::min<uint32_t>(m_segmentSize, m_rWndCallback() - m_sentSize);
    }
    if (check)
    {
        SequenceNumber32 s2, high2;
        bool found2 = original(this, &s2, &high2, isRecovery);
        if (found2 != found || (found && (s2 != s || high2 != high)))
        {
            std::cerr << "netrepro-sim: NextSeg differs from ns-3's at " << Simulator::Now().GetSeconds()
                      << " s: " << found << " " << s << "-" << high << " against " << found2 << " " << s2 << "-"
                      << high2 << std::endl;
            std::exit(3);
        }
    }
    if (found)
    {
        *seq = s;
        *seqHigh = high;
    }
    return found;
}
} // namespace ns3

namespace
{
double g_epoch0 = 0;
std::map<std::string, Ptr<Node>> g_nodes;
std::map<std::string, Ptr<NetDevice>> g_devs;     // "A>B" -> A's device toward B
std::map<std::string, Ipv4Address> g_addr;        // "A>B" -> its address
std::map<std::string, std::shared_ptr<std::ofstream>> g_files;
uint16_t g_nextPort = 10000;
std::map<std::string, int> g_flowNumber; // per flows.csv: the clients number their flows from 1

[[noreturn]] void
Fail(int line, const std::string& what)
{
    std::cerr << "netrepro-sim: scenario line " << line << ": " << what << std::endl;
    std::exit(2);
}

std::ofstream&
File(const std::string& path)
{
    auto it = g_files.find(path);
    if (it == g_files.end())
    {
        auto f = std::make_shared<std::ofstream>(path, std::ios::app);
        *f << std::fixed;
        it = g_files.emplace(path, f).first;
    }
    return *it->second;
}

double
Epoch()
{
    return g_epoch0 + Simulator::Now().GetSeconds();
}

Ipv4Address
AddressOf(const std::string& node)
{
    for (auto& [key, a] : g_addr)
    {
        if (key.substr(0, key.find('>')) == node)
        {
            return a;
        }
    }
    return Ipv4Address::GetAny();
}

// --- the queue sampler ------------------------------------------------------------------------
struct Sampler
{
    Ptr<QueueDisc> qdisc;
    std::string path, dev, handle, kind;
    bool classes = false;
    Time interval;
    Time stop;
};

void
Sample(std::shared_ptr<Sampler> s)
{
    const QueueDisc::Stats& st = s->qdisc->GetStats();
    std::ofstream& f = File(s->path);
    f << std::setprecision(6) << "{\"t\":" << Epoch() << ",\"dev\":\"" << s->dev
      << "\",\"tx_bytes\":" << st.nTotalSentBytes << ",\"tx_packets\":" << st.nTotalSentPackets
      << ",\"qdisc\":[{\"kind\":\"" << s->kind << "\",\"handle\":\"" << s->handle
      << "\",\"bytes\":" << st.nTotalSentBytes << ",\"packets\":" << st.nTotalSentPackets
      << ",\"drops\":" << st.nTotalDroppedPackets << ",\"backlog\":" << s->qdisc->GetNBytes()
      << ",\"qlen\":" << s->qdisc->GetNPackets() << "}]";
    if (s->classes)
    {
        // `tc -s class show`: a block per class holding packets (fq_codel lists only those); the
        // minor number is the class's index + 1 (ns-3 makes a class when a bucket first holds a
        // packet, so it numbers buckets in that order, not by hash)
        std::ostringstream text;
        std::string major = s->handle.substr(0, s->handle.find(':'));
        for (std::size_t i = 0; i < s->qdisc->GetNQueueDiscClasses(); i++)
        {
            Ptr<QueueDisc> q = s->qdisc->GetQueueDiscClass(i)->GetQueueDisc();
            if (q->GetNPackets() == 0)
                continue;
            text << "class " << s->kind << " " << major << ":" << std::hex << (i + 1) << std::dec << " parent "
                 << major << ":\\n (dropped " << q->GetStats().nTotalDroppedPackets
                 << ", overlimits 0 requeues 0)\\n backlog " << q->GetNBytes() << "b " << q->GetNPackets()
                 << "p requeues 0\\n";
        }
        f << ",\"classes\":\"" << text.str() << "\"";
    }
    f << "}\n";
    if (Simulator::Now() + s->interval <= s->stop)
    {
        Simulator::Schedule(s->interval, &Sample, s);
    }
}

// --- ping ---------------------------------------------------------------------------------------
std::map<std::string, uint64_t> g_replies; // per ping file
struct Probe
{
    int seq = -1;
    bool answered = true;
};
std::map<std::string, Probe> g_lastProbe; // per ping file: the latest echo request sent

// ping -O: when a probe goes out and the one before it has no reply yet, iputils prints
// "no answer yet for icmp_seq=N" (ping(8)); the health checks count probes by these lines too
void
PingTx(std::string path, uint16_t seq, Ptr<Packet>)
{
    Probe& last = g_lastProbe[path];
    if (!last.answered)
        File(path) << std::setprecision(6) << "[" << Epoch() << "] no answer yet for icmp_seq=" << last.seq << "\n";
    last.seq = seq;
    last.answered = false;
}

void
PingRtt(std::string path, std::string label, uint16_t seq, Time rtt)
{
    g_replies[path]++;
    if (g_lastProbe[path].seq == seq)
        g_lastProbe[path].answered = true;
    File(path) << std::setprecision(6) << "[" << Epoch() << "] 64 bytes from " << label
               << ": icmp_seq=" << seq << " ttl=63 time=" << std::setprecision(3)
               << rtt.GetSeconds() * 1e3 << " ms\n";
}

// ping's closing statistics (iputils prints them when it ends by itself)
void
PingEnd(std::string path, std::string label, uint64_t sent, double span_s)
{
    uint64_t got = g_replies[path];
    File(path) << "\n--- " << label << " ping statistics ---\n"
               << sent << " packets transmitted, " << got << " received, " << std::setprecision(5)
               << (sent ? 100.0 * (sent - got) / sent : 0.0) << "% packet loss, time "
               << std::setprecision(0) << span_s * 1e3 << "ms\n";
}

// --- flows --------------------------------------------------------------------------------------
struct Flow
{
    int number;
    std::string label, path;
    double start, stop;
    double dataStart = -1; // the first byte's arrival at the client, s of simulated time (-1: none yet)
    Ptr<PacketSink> sink;
    Ptr<Application> source;
};

// TcpSocketBase::SendRST is protected: reached through a member pointer formed in a derived
// class, the one way C++ allows (the socket is never touched otherwise).
struct Reset : TcpSocketBase
{
    static void Send(TcpSocketBase* socket)
    {
        (socket->*(&Reset::SendRST))();
    }
};

// The flow's end as Linux sees it: curl's --max-time closes the client's socket, whose kernel
// answers the server's next segment with a RST (RFC 9293, 3.10.7.4: data for a closed socket),
// so the server stops at once. An ns-3 application's Close() instead sends everything still in
// the send buffer first: up to 4 MiB per bulk flow, minutes of a 10 Mbit/s bottleneck after the
// flow's phase. The source therefore resets the connection itself.
void
Abort(Ptr<Application> source)
{
    Ptr<Socket> socket;
    if (auto onoff = DynamicCast<OnOffApplication>(source))
        socket = onoff->GetSocket();
    else if (auto bulk = DynamicCast<BulkSendApplication>(source))
        socket = bulk->GetSocket();
    auto tcp = DynamicCast<TcpSocketBase>(socket);
    if (!tcp)
        return;
    UintegerValue size;
    tcp->GetAttribute("SndBufSize", size);
    if (tcp->GetTxAvailable() < size.Get()) // data still to send: not yet closed
        Reset::Send(PeekPointer(tcp));
}

void
FlowData(std::shared_ptr<Flow> f, Ptr<const Packet>, const Address&)
{
    if (f->dataStart < 0)
        f->dataStart = Simulator::Now().GetSeconds();
}

void
FlowEnd(std::shared_ptr<Flow> f)
{
    // curl --max-time ends every flow: exit code 28, as in roles/flow_clients
    char name[16];
    std::snprintf(name, sizeof name, "file%02d", f->number);
    // data_start_s: curl's time_starttransfer, 0 when no byte came (as curl writes it). FTP's
    // control dialogue is not simulated: the data connection opens at the flow's start
    File(f->path) << std::setprecision(6) << f->number << "," << f->label << "," << name << ","
                  << g_epoch0 + f->start << "," << Epoch() << ",28," << f->sink->GetTotalRx() << ","
                  << (f->dataStart < 0 ? 0.0 : f->dataStart - f->start) << "\n";
    File(f->path).flush();
    Abort(f->source);
}

// --- iperf3 ------------------------------------------------------------------------------------
// TcpSocketBase's congestion state (m_tcb) is protected: reached as Reset reaches SendRST.
struct Tcb : TcpSocketBase
{
    static Ptr<TcpSocketState> Of(TcpSocketBase* socket)
    {
        return socket->*(&Tcb::m_tcb);
    }
};

struct Stream
{
    Ptr<TcpSocketBase> socket;
    SequenceNumber32 head0, lastHead; // the first byte not yet acked: at the test's start, at the last report
    uint64_t retx = 0, lastRetx = 0;  // segments retransmitted: all, at the last report
    uint32_t maxCwnd = 0;
    Time minRtt = Time::Max(), maxRtt = Time(0), sumRtt = Time(0);
    uint64_t rttSamples = 0;
    uint64_t received = 0; // bytes the server's socket of this stream received
};

struct Iperf3
{
    std::string path, cc;
    int streams;
    double omit, duration, interval, start;
    uint32_t sndbuf, rcvbuf;
    bool pacing, sack;
    uint64_t maxRate;
    Ptr<Node> client, server;
    Ipv4Address address;
    uint16_t port;
    std::vector<Stream> s;
    std::vector<uint64_t> rxAtOmit;
    int connected = 0;
    double testStart = -1, lastReport = 0;
    std::ostringstream intervals; // the JSON of the intervals so far
    bool firstInterval = true;
};

uint64_t
Acked(const Stream& st)
{
    return st.socket->GetTxBuffer()->HeadSequence() - st.lastHead;
}

void
Report(std::shared_ptr<Iperf3> t)
{
    double now = Simulator::Now().GetSeconds();
    double since = t->testStart + (t->omit > 0 && now > t->testStart + t->omit + 1e-9 ? t->omit : 0.0);
    double a = t->lastReport - since, seconds = now - t->lastReport;
    bool omitted = t->omit > 0 && now <= t->testStart + t->omit + 1e-9;
    if (seconds <= 1e-9)
        return;
    std::ostringstream streams;
    uint64_t sumBytes = 0, sumRetx = 0;
    for (std::size_t k = 0; k < t->s.size(); k++)
    {
        Stream& st = t->s[k];
        uint64_t bytes = Acked(st);
        Ptr<TcpSocketState> tcb = Tcb::Of(PeekPointer(st.socket));
        uint64_t retx = st.retx - st.lastRetx;
        sumBytes += bytes;
        sumRetx += retx;
        Time rtt = tcb->m_srtt.Get();
        streams << (k ? "," : "") << std::setprecision(6) << "{\"socket\":" << k + 5 << ",\"start\":" << a
                << ",\"end\":" << a + seconds << ",\"seconds\":" << seconds << ",\"bytes\":" << bytes
                << ",\"bits_per_second\":" << bytes * 8 / seconds << ",\"retransmits\":" << retx
                << ",\"snd_cwnd\":" << tcb->m_cWnd.Get() << ",\"rtt\":" << rtt.GetMicroSeconds()
                << ",\"pmtu\":" << tcb->m_segmentSize + 52 << ",\"omitted\":" << (omitted ? "true" : "false")
                << ",\"sender\":true}";
        st.lastHead = st.socket->GetTxBuffer()->HeadSequence();
        st.lastRetx = st.retx;
    }
    t->intervals << (t->firstInterval ? "" : ",") << "{\"streams\":[" << streams.str() << "],\"sum\":{"
                 << std::setprecision(6) << "\"start\":" << a << ",\"end\":" << a + seconds
                 << ",\"seconds\":" << seconds << ",\"bytes\":" << sumBytes << ",\"bits_per_second\":"
                 << sumBytes * 8 / seconds << ",\"retransmits\":" << sumRetx
                 << ",\"omitted\":" << (omitted ? "true" : "false") << ",\"sender\":true}}";
    t->firstInterval = false;
    t->lastReport = now;
}

void Iperf3End(std::shared_ptr<Iperf3> t);

void
Iperf3Tick(std::shared_ptr<Iperf3> t)
{
    Report(t);
    double now = Simulator::Now().GetSeconds();
    double omitEnd = t->testStart + t->omit, end = t->testStart + t->omit + t->duration;
    if (t->omit > 0 && std::abs(now - omitEnd) < 1e-9)
    {
        // iperf3 -O: the statistics start again once the omitted seconds are over
        for (std::size_t k = 0; k < t->s.size(); k++)
        {
            t->s[k].head0 = t->s[k].socket->GetTxBuffer()->HeadSequence();
            t->s[k].retx = t->s[k].lastRetx = 0;
            t->rxAtOmit[k] = t->s[k].received;
            t->s[k].maxCwnd = 0;
            t->s[k].minRtt = Time::Max();
            t->s[k].maxRtt = t->s[k].sumRtt = Time(0);
            t->s[k].rttSamples = 0;
        }
    }
    if (now >= end - 1e-9)
    {
        Iperf3End(t);
        return;
    }
    // the next report: an interval later, or at the end of the omitted seconds or of the test
    double next = now + t->interval;
    if (t->omit > 0 && now < omitEnd - 1e-9)
        next = std::min(next, omitEnd);
    Simulator::Schedule(Seconds(std::min(next, end) - now), &Iperf3Tick, t);
}

void
Iperf3End(std::shared_ptr<Iperf3> t)
{
    std::ostringstream streams;
    uint64_t sent = 0, received = 0, retx = 0;
    for (std::size_t k = 0; k < t->s.size(); k++)
    {
        Stream& st = t->s[k];
        uint64_t b = st.socket->GetTxBuffer()->HeadSequence() - st.head0, r = st.received - t->rxAtOmit[k];
        sent += b;
        received += r;
        retx += st.retx;
        streams << (k ? "," : "") << std::setprecision(6) << "{\"sender\":{\"socket\":" << k + 5
                << ",\"start\":0,\"end\":" << t->duration << ",\"seconds\":" << t->duration << ",\"bytes\":" << b
                << ",\"bits_per_second\":" << b * 8 / t->duration << ",\"retransmits\":" << st.retx
                << ",\"max_snd_cwnd\":" << st.maxCwnd << ",\"max_rtt\":" << st.maxRtt.GetMicroSeconds()
                << ",\"min_rtt\":" << (st.rttSamples ? st.minRtt.GetMicroSeconds() : 0) << ",\"mean_rtt\":"
                << (st.rttSamples ? st.sumRtt.GetMicroSeconds() / (int64_t)st.rttSamples : 0)
                << ",\"sender\":true},\"receiver\":{\"socket\":" << k + 5 << ",\"start\":0,\"end\":" << t->duration
                << ",\"seconds\":" << t->duration << ",\"bytes\":" << r << ",\"bits_per_second\":"
                << r * 8 / t->duration << ",\"sender\":true}}";
        Reset::Send(PeekPointer(st.socket)); // iperf3's end: the client closes, its data is not drained
    }
    std::ofstream f(t->path);
    f << std::fixed << std::setprecision(6) << "{\"start\":{\"version\":\"netrepro-sim (ns-3 " << "3.44"
      << ")\",\"timestamp\":{\"timesecs\":" << (uint64_t)(g_epoch0 + t->start) << "},\"tcp_mss_default\":"
      << Tcb::Of(PeekPointer(t->s[0].socket))->m_segmentSize << ",\"test_start\":{\"protocol\":\"TCP\",\"num_streams\":" << t->streams
      << ",\"omit\":" << t->omit << ",\"duration\":" << t->duration << "}},\"intervals\":["
      << t->intervals.str() << "],\"end\":{\"streams\":[" << streams.str() << "],\"sum_sent\":{\"start\":0,\"end\":"
      << t->duration << ",\"seconds\":" << t->duration << ",\"bytes\":" << sent << ",\"bits_per_second\":"
      << sent * 8 / t->duration << ",\"retransmits\":" << retx << ",\"sender\":true},\"sum_received\":{\"start\":0,"
      << "\"end\":" << t->duration << ",\"seconds\":" << t->duration << ",\"bytes\":" << received
      << ",\"bits_per_second\":" << received * 8 / t->duration << ",\"sender\":true},\"sender_tcp_congestion\":\""
      << t->cc << "\"}}\n";
}

// Keep the socket's send buffer full (iperf3 writes as fast as the socket takes it).
void
Fill(Ptr<Socket> socket, uint32_t)
{
    while (socket->GetTxAvailable() > 0)
    {
        uint32_t n = std::min<uint32_t>(socket->GetTxAvailable(), 131072);
        if (socket->Send(Create<Packet>(n)) < 0)
            break;
    }
}

void
Connected(std::shared_ptr<Iperf3> t, Ptr<Socket>)
{
    if (++t->connected < t->streams)
        return;
    // iperf3 starts its test timer once every stream is connected
    t->testStart = t->lastReport = Simulator::Now().GetSeconds();
    for (auto& st : t->s)
        st.head0 = st.lastHead = st.socket->GetTxBuffer()->HeadSequence();
    double first = t->omit > 0 ? std::min(t->interval, t->omit) : t->interval;
    Simulator::Schedule(Seconds(std::min(first, t->omit + t->duration)), &Iperf3Tick, t);
    for (auto& st : t->s)
        Fill(st.socket, 0);
}

void
Retransmitted(std::shared_ptr<Iperf3> t, std::size_t k, Ptr<const Packet>, const TcpHeader&, const Address&,
              const Address&, Ptr<const TcpSocketBase>)
{
    t->s[k].retx++;
}

void
RttSample(std::shared_ptr<Iperf3> t, std::size_t k, Time, Time rtt)
{
    Stream& st = t->s[k];
    st.minRtt = std::min(st.minRtt, rtt);
    st.maxRtt = std::max(st.maxRtt, rtt);
    st.sumRtt += rtt;
    st.rttSamples++;
}

void
CwndSample(std::shared_ptr<Iperf3> t, std::size_t k, uint32_t, uint32_t cwnd)
{
    t->s[k].maxCwnd = std::max(t->s[k].maxCwnd, cwnd);
}

void
Received(std::shared_ptr<Iperf3> t, Ptr<Socket> socket)
{
    // the stream is the accepted socket's peer port's order among the client's
    Address from;
    Ptr<Packet> p;
    uint64_t bytes = 0;
    while ((p = socket->RecvFrom(from)) && p->GetSize() > 0)
        bytes += p->GetSize();
    uint16_t peer = InetSocketAddress::ConvertFrom(from).GetPort();
    for (auto& st : t->s)
    {
        Address local;
        st.socket->GetSockName(local);
        if (InetSocketAddress::ConvertFrom(local).GetPort() == peer)
            st.received += bytes;
    }
}

void
Iperf3Start(std::shared_ptr<Iperf3> t)
{
    File(t->path + ".t0") << std::setprecision(6) << Epoch() << "\n";
    File(t->path + ".t0").flush();
    for (int k = 0; k < t->streams; k++)
    {
        Ptr<Socket> sock = Socket::CreateSocket(t->client, TcpSocketFactory::GetTypeId());
        auto tcp = DynamicCast<TcpSocketBase>(sock);
        if (t->cc != "-")
        {
            ObjectFactory cc;
            cc.SetTypeId(t->cc);
            tcp->SetCongestionControlAlgorithm(cc.Create<TcpCongestionOps>());
        }
        tcp->SetAttribute("SndBufSize", UintegerValue(t->sndbuf));
        tcp->SetAttribute("Sack", BooleanValue(t->sack));
        Ptr<TcpSocketState> tcb = Tcb::Of(PeekPointer(tcp));
        // Linux paces with fq, SO_MAX_PACING_RATE or a congestion control that asks for it
        // (bbr): at 2x cwnd/srtt in slow start and 1.2x after (tcp_update_pacing_rate), capped
        // at the maximum rate; ns-3's pacing ratios are Linux's (200 %, 120 %)
        tcb->m_pacing = t->pacing || tcb->m_pacing;
        tcb->m_maxPacingRate = t->maxRate ? DataRate(t->maxRate) : DataRate("1000Gbps");
        std::size_t index = t->s.size();
        t->s.push_back(Stream{tcp});
        t->rxAtOmit.push_back(0);
        tcp->Bind();
        // every trace source exists in ns-3 3.44 (TcpSocketBase::GetTypeId)
        tcp->TraceConnectWithoutContext("Retransmission", MakeBoundCallback(&Retransmitted, t, index));
        tcp->TraceConnectWithoutContext("LastRTT", MakeBoundCallback(&RttSample, t, index));
        tcp->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&CwndSample, t, index));
        tcp->SetConnectCallback(MakeBoundCallback(&Connected, t), MakeNullCallback<void, Ptr<Socket>>());
        tcp->SetSendCallback(MakeCallback(&Fill));
        tcp->Connect(InetSocketAddress(t->address, t->port));
    }
}

void
Accepted(std::shared_ptr<Iperf3> t, Ptr<Socket> socket, const Address&)
{
    socket->SetRecvCallback(MakeBoundCallback(&Received, t));
}
} // namespace

int
main(int argc, char* argv[])
{
    if (argc != 3)
    {
        std::cerr << "usage: netrepro-sim SCENARIO OUTDIR" << std::endl;
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in)
    {
        std::cerr << "netrepro-sim: cannot read " << argv[1] << std::endl;
        return 2;
    }
    std::string outDir = argv[2];
    double stop = 0;
    std::vector<std::pair<int, std::vector<std::string>>> lines;
    std::string text;
    int n = 0;
    while (std::getline(in, text))
    {
        n++;
        text = text.substr(0, text.find('#'));
        std::istringstream ss(text);
        std::vector<std::string> w;
        for (std::string x; ss >> x;)
        {
            w.push_back(x);
        }
        if (!w.empty())
        {
            lines.emplace_back(n, w);
        }
    }
    // pass 1: defaults, nodes, links (the stack before addresses, qdiscs before addresses)
    InternetStackHelper stack;
    uint32_t net = 0;
    std::vector<std::tuple<std::string, std::string, NetDeviceContainer>> links;
    std::map<std::string, std::vector<std::string>> qdiscOf; // "A>B" -> [typeid, attr=value...]
    for (auto& [ln, w] : lines)
    {
        const std::string& d = w[0];
        if (d == "epoch0" && w.size() == 2)
            g_epoch0 = std::stod(w[1]);
        else if (d == "run" && w.size() == 2)
            RngSeedManager::SetRun(std::stoull(w[1])); // the repetition: its own random streams
        else if (d == "stop" && w.size() == 2)
            stop = std::stod(w[1]);
        else if (d == "tcp" && w.size() == 7)
        {
            Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(w[1])));
            Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(std::stoul(w[2])));
            Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(std::stod(w[3]))));
            Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(std::stoul(w[4])));
            Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(std::stoul(w[5])));
            Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(std::stoul(w[6])));
            // No zero-window probe within a trial. ns-3 3.44's TcpSocketBase::PersistTimeout
            // probes with a byte of new data, m_txBuffer->CopyFromSequence(1, m_nextTxSequence),
            // and dereferences the null item it gets when nothing new is buffered: the simulator
            // dies with SIGSEGV (pie-vs-red's PIE trials at 5 Mbit/s and TIME_SCALE 0.1, 6 s after
            // the default timeout started). Linux probes with an old sequence number instead
            // (net/ipv4/tcp_output.c, tcp_xmit_probe_skb: snd_una - 1), and this program's
            // receivers read every byte at once, so a window is never closed for long.
            // Simulations that sent no probe are byte for byte the same with it.
            Config::SetDefault("ns3::TcpSocket::PersistTimeout", TimeValue(Seconds(1e6)));
        }
        else if (d == "default" && w.size() == 3)
        {
            if (!Config::SetDefaultFailSafe(w[1], StringValue(w[2])))
                Fail(ln, "no attribute " + w[1] + " taking " + w[2]);
        }
        else if (d == "node" && w.size() == 2)
        {
            Ptr<Node> node = CreateObject<Node>();
            stack.Install(node);
            g_nodes[w[1]] = node;
        }
        else if (d == "link" && w.size() == 6)
        {
            if (!g_nodes.count(w[1]) || !g_nodes.count(w[2]))
                Fail(ln, "link of an undeclared node");
            PointToPointHelper p2p;
            p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(std::stoull(w[3]))));
            p2p.SetChannelAttribute("Delay", TimeValue(Seconds(std::stod(w[4]))));
            // a short device queue, so that the queue builds in the queue disc above it
            p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(w[5] + "p"));
            NetDeviceContainer devs = p2p.Install(g_nodes[w[1]], g_nodes[w[2]]);
            g_devs[w[1] + ">" + w[2]] = devs.Get(0);
            g_devs[w[2] + ">" + w[1]] = devs.Get(1);
            links.emplace_back(w[1], w[2], devs);
        }
        else if (d == "qdisc" && w.size() >= 4)
            qdiscOf[w[1] + ">" + w[2]] = std::vector<std::string>(w.begin() + 3, w.end());
        else if (d == "congestion" && w.size() == 3)
        {
            if (!g_nodes.count(w[1]))
                Fail(ln, "congestion of an undeclared node");
            TypeId tid;
            if (!TypeId::LookupByNameFailSafe(w[2], &tid))
                Fail(ln, "no congestion control " + w[2]);
            g_nodes[w[1]]->GetObject<TcpL4Protocol>()->SetAttribute("SocketType", TypeIdValue(tid));
        }
        else if (d != "sample" && d != "ping" && d != "flows" && d != "iperf3")
            Fail(ln, "unknown directive or wrong number of fields: " + d);
    }
    // every device gets a queue disc before its address: the given one, else a FIFO
    // (Assign would install FqCoDel; the emulated sites' other interfaces have pfifo_fast)
    std::map<std::string, Ptr<QueueDisc>> qdiscs;
    for (auto& [key, dev] : g_devs)
    {
        TrafficControlHelper tch;
        auto it = qdiscOf.find(key);
        if (it == qdiscOf.end())
        {
            tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("1000p"));
        }
        else
        {
            tch.SetRootQueueDisc(it->second[0]);
        }
        QueueDiscContainer c = tch.Install(dev);
        if (it != qdiscOf.end())
        {
            for (size_t i = 1; i < it->second.size(); i++)
            {
                const std::string& kv = it->second[i];
                auto eq = kv.find('=');
                if (eq == std::string::npos || !c.Get(0)->SetAttributeFailSafe(kv.substr(0, eq), StringValue(kv.substr(eq + 1))))
                {
                    std::cerr << "netrepro-sim: qdisc " << key << ": cannot set " << kv << " on " << it->second[0] << std::endl;
                    return 2;
                }
            }
        }
        qdiscs[key] = c.Get(0);
    }
    Ipv4AddressHelper addr;
    for (auto& [a, b, devs] : links)
    {
        // one /30 per link: 10.<n/64>.<(n%64)*4>.{1,2}
        Ipv4AddressHelper h;
        std::ostringstream b30;
        b30 << "10." << (net / 64) << "." << ((net % 64) * 4) << ".0";
        h.SetBase(Ipv4Address(b30.str().c_str()), Ipv4Mask("255.255.255.252"));
        Ipv4InterfaceContainer ifc = h.Assign(devs);
        g_addr[a + ">" + b] = ifc.GetAddress(0);
        g_addr[b + ">" + a] = ifc.GetAddress(1);
        net++;
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    // pass 2: collectors and flows
    for (auto& [ln, w] : lines)
    {
        const std::string& d = w[0];
        if (d == "sample" && (w.size() == 10 || w.size() == 11))
        {
            auto s = std::make_shared<Sampler>();
            auto key = w[1] + ">" + w[2];
            if (!qdiscs.count(key))
                Fail(ln, "no device " + key);
            s->qdisc = qdiscs[key];
            s->interval = Seconds(std::stod(w[3]));
            s->stop = Seconds(std::stod(w[5]));
            s->path = outDir + "/" + w[6];
            s->dev = w[7];
            s->handle = w[8];
            s->kind = w[9];
            s->classes = w.size() == 11 && w[10] == "classes";
            Simulator::Schedule(Seconds(std::stod(w[4])), &Sample, s);
        }
        else if (d == "ping" && w.size() == 8)
        {
            if (!g_nodes.count(w[1]) || !g_nodes.count(w[2]))
                Fail(ln, "ping of an undeclared node");
            PingHelper ping(AddressOf(w[2]));
            ping.SetAttribute("Interval", TimeValue(Seconds(std::stod(w[4]))));
            ping.SetAttribute("Size", UintegerValue(56));
            ping.SetAttribute("VerboseMode", EnumValue(Ping::VerboseMode::SILENT));
            ApplicationContainer app = ping.Install(g_nodes[w[1]]);
            app.Start(Seconds(std::stod(w[5])));
            app.Stop(Seconds(std::stod(w[6])));
            std::string path = outDir + "/" + w[7];
            File(path) << "PING " << w[3] << " (" << w[3] << ") 56(84) bytes of data.\n";
            double a = std::stod(w[5]), b = std::stod(w[6]), every = std::stod(w[4]);
            uint64_t sent = static_cast<uint64_t>(std::ceil((b - a) / every - 1e-9));
            // after the last reply can arrive (a second later), as ping waits for it
            Simulator::Schedule(Seconds(b + 1.0), &PingEnd, path, w[3], sent, b - a);
            app.Get(0)->TraceConnectWithoutContext("Rtt", MakeBoundCallback(&PingRtt, path, w[3]));
            app.Get(0)->TraceConnectWithoutContext("Tx", MakeBoundCallback(&PingTx, path));
        }
        else if (d == "iperf3" && w.size() == 16)
        {
            if (!g_nodes.count(w[1]) || !g_nodes.count(w[2]))
                Fail(ln, "iperf3 of an undeclared node");
            auto t = std::make_shared<Iperf3>();
            t->client = g_nodes[w[1]];
            t->server = g_nodes[w[2]];
            t->address = AddressOf(w[2]);
            t->port = g_nextPort++;
            t->streams = std::stoi(w[4]);
            t->start = std::stod(w[5]);
            t->omit = std::stod(w[6]);
            t->duration = std::stod(w[7]);
            t->interval = std::stod(w[8]);
            t->cc = w[9];
            t->sndbuf = std::stoul(w[10]);
            t->rcvbuf = std::stoul(w[11]);
            t->pacing = w[12] == "1";
            t->maxRate = std::stoull(w[13]);
            t->sack = w[14] == "1";
            t->path = outDir + "/" + w[15];
            TypeId ccId;
            if (t->cc != "-" && !TypeId::LookupByNameFailSafe(t->cc, &ccId))
                Fail(ln, "no congestion control " + t->cc);
            // the server (iperf3 -s): its receive buffer is the receiver's tcp_rmem
            Ptr<Socket> listener = Socket::CreateSocket(t->server, TcpSocketFactory::GetTypeId());
            listener->SetAttribute("RcvBufSize", UintegerValue(t->rcvbuf));
            listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), t->port));
            listener->Listen();
            listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                        MakeBoundCallback(&Accepted, t));
            Simulator::Schedule(Seconds(t->start), &Iperf3Start, t);
        }
        else if (d == "flows" && w.size() == 9)
        {
            if (!g_nodes.count(w[1]) || !g_nodes.count(w[2]))
                Fail(ln, "flows of an undeclared node");
            uint32_t count = std::stoul(w[4]);
            double start = std::stod(w[5]), end = std::stod(w[6]);
            uint64_t rate = std::stoull(w[7]);
            std::string path = outDir + "/" + w[8];
            std::ofstream& f = File(path);
            if (f.tellp() == 0)
                f << "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,data_start_s\n";
            Ipv4Address client = AddressOf(w[2]);
            for (uint32_t k = 0; k < count; k++)
            {
                uint16_t port = g_nextPort++;
                PacketSinkHelper sinkHelper("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
                ApplicationContainer sinkApp = sinkHelper.Install(g_nodes[w[2]]);
                sinkApp.Start(Seconds(0));
                ApplicationContainer src;
                if (rate == 0)
                {
                    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(client, port));
                    bulk.SetAttribute("SendSize", UintegerValue(1448));
                    src = bulk.Install(g_nodes[w[1]]);
                }
                else
                {
                    // a server that writes RATE_BPS into the socket (vsftpd's anon_max_rate
                    // sleeps to keep each connection's average at its limit)
                    OnOffHelper onoff("ns3::TcpSocketFactory", InetSocketAddress(client, port));
                    onoff.SetConstantRate(DataRate(rate), 1448);
                    src = onoff.Install(g_nodes[w[1]]);
                }
                src.Start(Seconds(start));
                src.Stop(Seconds(end));
                auto fl = std::make_shared<Flow>();
                fl->number = ++g_flowNumber[path];
                fl->label = w[3];
                fl->path = path;
                fl->start = start;
                fl->stop = end;
                fl->sink = DynamicCast<PacketSink>(sinkApp.Get(0));
                fl->sink->TraceConnectWithoutContext("Rx", MakeBoundCallback(&FlowData, fl));
                fl->source = src.Get(0);
                Simulator::Schedule(Seconds(end), &FlowEnd, fl);
            }
        }
    }
    Simulator::Stop(Seconds(stop));
    Simulator::Run();
    Simulator::Destroy();
    for (auto& [path, f] : g_files)
    {
        f->close();
        if (!*f)
        {
            std::cerr << "netrepro-sim: cannot write " << path << std::endl;
            return 1;
        }
    }
    return 0;
}
