// `airlock daemon --metrics`: what a real Prometheus server scrapes from it
// while sandboxes make allowed and denied traffic, checked against what the
// test made them do. The exposition passes `promtool check metrics`, the
// shipped alerting rules fire on the real violations, and every query of the
// shipped Grafana dashboard returns data.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "fixture.h"

namespace it {
namespace {

class Metrics : public AirlockTest {
protected:
	// The value of the sample written exactly as `series` in the exposition.
	static std::optional<double> sample(const std::string& text, const std::string& series)
	{
		std::istringstream in(text);
		std::string line;
		while (std::getline(in, line))
			if (line.rfind(series + " ", 0) == 0)
				return std::stod(line.substr(series.size() + 1));
		return std::nullopt;
	}

	std::string scrape(int port)
	{
		Result r = run({"curl", "-sf", fmt::format("http://127.0.0.1:{}/metrics", port)}, 10s);
		return r.status == 0 ? r.out : "";
	}

	// The result of an instant query to the Prometheus server, or null.
	json api_query(int port, const std::string& q)
	{
		Result r = run({"curl", "-sfG", "--data-urlencode", "query=" + q,
				fmt::format("http://127.0.0.1:{}/api/v1/query", port)},
			       10s);
		json j = json::parse(r.out, nullptr, false);
		if (j.is_discarded() || j.value("status", "") != "success" || !j["data"]["result"].is_array())
			return json();
		return j["data"]["result"];
	}

	// The value of its only series.
	std::optional<double> query(int port, const std::string& q)
	{
		json res = api_query(port, q);
		if (!res.is_array() || res.size() != 1)
			return std::nullopt;
		return std::stod(res[0]["value"][1].get<std::string>());
	}

	// How many series it returns (-1: the query failed).
	int series(int port, const std::string& q)
	{
		json res = api_query(port, q);
		return res.is_array() ? static_cast<int>(res.size()) : -1;
	}

	// A Prometheus server scraping the daemon on `mport` every second, with
	// the shipped alerting rules, its API on `pport`.
	Proc& start_prometheus(int mport, int pport)
	{
		std::string cfg = env().write_text(
			"prometheus.yml", fmt::format("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
						      "rule_files:\n  - {}/deploy/prometheus/airlock-alerts.yml\n"
						      "scrape_configs:\n  - job_name: airlock\n    static_configs:\n"
						      "      - targets: ['127.0.0.1:{}']\n",
						      source_dir(), mport));
		return env().start({"prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + env().path("tsdb"),
				    fmt::format("--web.listen-address=127.0.0.1:{}", pport)},
				   "prometheus");
	}

	// Every query of the shipped dashboard's panels in its "World and
	// gates" row (`world`) or in the other rows returns data from the
	// Prometheus server on `pport`, with the variables set to "all" the way
	// Grafana expands them.
	void expect_dashboard_data(int pport, bool world)
	{
		json dash = json::parse(read_file(source_dir() + "/dashboards/airlock.json"));
		std::vector<std::string> exprs;
		std::string row;
		for (const auto& panel : dash["panels"]) {
			if (panel.value("type", "") == "row")
				row = panel.value("title", "");
			if ((row == "World and gates") != world)
				continue;
			for (const auto& t : panel.value("targets", json::array()))
				exprs.push_back(t["expr"].get<std::string>());
		}
		ASSERT_GE(exprs.size(), world ? 9u : 15u);
		auto expand = [](std::string e) {
			for (const auto& [var, val] : std::vector<std::pair<std::string, std::string>>{
				     {"$__rate_interval", "30s"}, {"$sandbox", ".*"}, {"$instance", ".*"}}) {
				for (size_t at = e.find(var); at != std::string::npos; at = e.find(var, at))
					e.replace(at, var.size(), val);
			}
			return e;
		};
		for (const auto& e : exprs) {
			std::string q = expand(e);
			EXPECT_TRUE(wait_until([&] { return series(pport, q) > 0; }, 20s, 250ms))
				<< "dashboard query returns no data: " << q << " (" << series(pport, q) << ")";
		}
		for (const char* var : {"sandbox", "instance"})
			EXPECT_NE(dash["templating"].dump().find(var), std::string::npos);
	}

	Proc& start_daemon(int port)
	{
		Proc& d = env().start(env().airlock_argv({"daemon", "--metrics", fmt::format("127.0.0.1:{}", port)}),
				      "daemon");
		if (!wait_until([&] { return d.err().find("watching") != std::string::npos || !d.running(); }, 10s) ||
		    !d.running())
			throw std::runtime_error("the daemon did not start: " + d.describe());
		return d;
	}
};

TEST_F(Metrics, PrometheusScrapesExactKernelCounters)
{
	int mport = free_port();
	Proc& daemon = start_daemon(mport);

	// Sandbox A (airlock run): one allowed datagram, three denied ones.
	std::string a = "a" + env().id;
	std::vector<std::string> sends = {dest4(kAllowed4, 9000), env().marker("ok")};
	for (int i = 0; i < 3; i++) {
		sends.push_back(dest4(kDenied4, 9001 + i));
		sends.push_back(env().marker(fmt::format("no{}", i)));
	}
	RunSpec s;
	s.policy = env().write_policy("a.json", base_policy("it-metrics-a"));
	s.name = a;
	s.cmd = Sequence({env().py("udp_send.py", sends), env().py("wait_file.py", {env().path("release"), "40"})});
	Proc& runner = env().start_run(s);

	// Sandbox B (attached, freeze): one violation freezes it.
	std::string b = "b" + env().id;
	std::string cg = cgroup2_mount() + "/" + env().cgroup_parent + "/ext";
	::mkdir((cgroup2_mount() + "/" + env().cgroup_parent).c_str(), 0755);
	ASSERT_EQ(::mkdir(cg.c_str(), 0755), 0) << cg;
	Result at = env().airlock({"attach", "--cgroup", cg, "--policy",
				   env().write_policy("b.json", base_policy("it-metrics-b", "freeze")), "--name", b,
				   "--audit-log", env().audit_path()});
	ASSERT_EQ(at.status, 0) << at.describe();
	Proc& victim = env().start({"nsenter", "--net=" + env().topo->client_ns_path(), "/bin/sh", "-c",
				    "echo $$ > \"$0/cgroup.procs\" && shift && exec \"$@\"", cg, "-", python(),
				    client_script("udp_send.py"), dest4(kDenied4, 9010), env().marker("b-no")},
				   "victim");
	ASSERT_TRUE(wait_until([&] { return !events(env().audit(), "frozen").empty(); }, 10s))
		<< daemon.describe() << victim.describe() << dump_lines(env().audit());

	// The exposition itself: exact counters, valid for promtool.
	std::string text;
	ASSERT_TRUE(wait_until(
		[&] {
			text = scrape(mport);
			return sample(text, fmt::format("airlock_violations_total{{sandbox=\"{}\",kind=\"no-rule\"}}",
							a)) == 3.0;
		},
		10s))
		<< text;
	EXPECT_EQ(sample(text,
			 fmt::format("airlock_decisions_total{{sandbox=\"{}\",hook=\"sendmsg4\",verdict=\"allow\"}}",
				     a)),
		  1.0)
		<< text;
	EXPECT_EQ(sample(text,
			 fmt::format("airlock_decisions_total{{sandbox=\"{}\",hook=\"sendmsg4\",verdict=\"deny\"}}",
				     a)),
		  3.0);
	EXPECT_EQ(sample(text, fmt::format("airlock_sandbox_frozen{{sandbox=\"{}\"}}", b)), 1.0) << text;
	EXPECT_EQ(sample(text, fmt::format("airlock_sandbox_frozen{{sandbox=\"{}\"}}", a)), 0.0) << text;
	EXPECT_EQ(sample(text, "airlock_sandboxes"), 2.0) << text;
	EXPECT_EQ(sample(text, "airlock_freeze_latency_seconds_count"), 1.0) << text;
	EXPECT_GT(sample(text, fmt::format("airlock_egress_bytes_total{{sandbox=\"{}\"}}", a)).value_or(0), 0.0);
	EXPECT_TRUE(sample(text, fmt::format("airlock_dns_queries_total{{sandbox=\"{}\",verdict=\"deny\"}}", a)));
	EXPECT_TRUE(sample(text, fmt::format("airlock_events_lost_total{{sandbox=\"{}\"}}", a)));
	EXPECT_EQ(text.find("10.77.0.3"), std::string::npos) << "destinations are never labels";
	Result check = run({"promtool", "check", "metrics"}, 20s, text);
	EXPECT_EQ(check.status, 0) << check.describe();

	// A real Prometheus scraping the daemon sees the same.
	int pport = free_port();
	Proc& prom = start_prometheus(mport, pport);
	ASSERT_TRUE(wait_until(
		[&] {
			return query(pport, fmt::format("airlock_violations_total{{sandbox=\"{}\",kind=\"no-rule\"}}",
							a)) == 3.0;
		},
		30s, 200ms))
		<< prom.describe();
	EXPECT_EQ(query(pport, fmt::format("airlock_sandbox_frozen{{sandbox=\"{}\"}}", b)), 1.0);
	EXPECT_EQ(query(pport, "airlock_sandboxes"), 2.0);
	EXPECT_EQ(query(pport, "up{job=\"airlock\"}"), 1.0);
	EXPECT_EQ(query(pport, "airlock_freeze_latency_seconds_count"), 1.0);
	// The shipped alerting rules fire on these real violations.
	EXPECT_TRUE(wait_until(
		[&] {
			return query(pport,
				     fmt::format("ALERTS{{alertname=\"AirlockSandboxFrozen\",alertstate=\"firing\","
						 "sandbox=\"{}\"}}",
						 b)) == 1.0;
		},
		20s, 250ms))
		<< prom.describe();
	EXPECT_TRUE(wait_until(
		[&] {
			return query(pport, fmt::format("ALERTS{{alertname=\"AirlockViolation\",alertstate=\"firing\","
							"sandbox=\"{}\"}}",
							a)) == 1.0;
		},
		20s, 250ms))
		<< prom.describe();

	// Every query of the shipped dashboard outside its world row returns
	// data from this server (the world row's: AWorldSandboxs...).
	expect_dashboard_data(pport, false);

	write_file(env().path("release"), "");
	EXPECT_EQ(runner.wait(15s), std::optional<int>(0)) << runner.describe();
	Result k = env().airlock({"kill", b});
	EXPECT_EQ(k.status, 0) << k.describe();
}

// Every series of a sandbox exists from its start (violations and reloads
// at 0, so that increase() sees the first one), with an info series naming
// its policy, mode and action; the process_* series are there; nothing but
// airlock's and the process's own is exposed; a sandbox's series go with it.
TEST_F(Metrics, EverySeriesExistsFromTheStartAndNothingElseIsExposed)
{
	int mport = free_port();
	start_daemon(mport);
	std::string b = "i" + env().id;
	std::string cg = cgroup2_mount() + "/" + env().cgroup_parent + "/info";
	::mkdir((cgroup2_mount() + "/" + env().cgroup_parent).c_str(), 0755);
	ASSERT_EQ(::mkdir(cg.c_str(), 0755), 0) << cg;
	Result at = env().airlock({"attach", "--cgroup", cg, "--policy",
				   env().write_policy("b.json", base_policy("it-metrics-info", "freeze")), "--name", b,
				   "--audit-log", env().audit_path()});
	ASSERT_EQ(at.status, 0) << at.describe();
	// The kernel's series put the sandbox first; the registry's
	// (reloads) are in label-name order.
	auto series_of = [&](const std::string& name, const std::string& labels) {
		return fmt::format("{}{{sandbox=\"{}\"{}}}", name, b, labels);
	};
	std::string text = scrape(mport);
	EXPECT_EQ(sample(text, series_of("airlock_sandbox_info",
					 ",policy=\"it-metrics-info\",mode=\"enforce\",on_violation=\"freeze\"")),
		  1.0)
		<< text;
	for (const char* kind : {"no-rule", "rule-deny", "dns-name", "family"})
		EXPECT_EQ(sample(text, series_of("airlock_violations_total", fmt::format(",kind=\"{}\"", kind))), 0.0)
			<< kind << "\n"
			<< text;
	EXPECT_EQ(sample(text, fmt::format("airlock_policy_reloads_total{{result=\"ok\",sandbox=\"{}\"}}", b)), 0.0)
		<< text;
	EXPECT_EQ(sample(text, fmt::format("airlock_policy_reloads_total{{result=\"error\",sandbox=\"{}\"}}", b)), 0.0)
		<< text;
	EXPECT_EQ(sample(text, series_of("airlock_events_suppressed_total", ",hook=\"connect4\"")), 0.0) << text;
	EXPECT_GT(sample(text, "process_cpu_seconds_total").value_or(-1), 0.0) << text;
	EXPECT_GT(sample(text, "process_resident_memory_bytes").value_or(-1), 1e6) << text;
	EXPECT_GT(sample(text, "process_open_fds").value_or(-1), 3.0) << text;
	EXPECT_GT(sample(text, "process_max_fds").value_or(-1), 0.0) << text;
	EXPECT_NEAR(sample(text, "process_start_time_seconds").value_or(0), static_cast<double>(::time(nullptr)), 60.0)
		<< text;
	std::istringstream lines(text);
	for (std::string l; std::getline(lines, l);)
		if (!l.empty() && l.front() != '#') {
			EXPECT_TRUE(l.rfind("airlock_", 0) == 0 || l.rfind("process_", 0) == 0) << l;
		}
	Result check = run({"promtool", "check", "metrics"}, 20s, text);
	EXPECT_EQ(check.status, 0) << check.describe();

	Result re = env().airlock(
		{"reload", b, env().write_policy("b2.json", base_policy("it-metrics-info2", "kill"))});
	ASSERT_EQ(re.status, 0) << re.describe();
	text = scrape(mport);
	EXPECT_EQ(sample(text, fmt::format("airlock_policy_reloads_total{{result=\"ok\",sandbox=\"{}\"}}", b)), 1.0)
		<< text;
	EXPECT_EQ(sample(text, series_of("airlock_sandbox_info",
					 ",policy=\"it-metrics-info2\",mode=\"enforce\",on_violation=\"kill\"")),
		  1.0)
		<< text;
	Result d = env().airlock({"detach", b});
	ASSERT_EQ(d.status, 0) << d.describe();
	ASSERT_TRUE(wait_until([&] { return scrape(mport).find(b) == std::string::npos; }, 5s)) << scrape(mport);
}

// A world sandbox's proxy and budgets are series of their own: what the
// recorder took (connections, requests, datagrams, records, exactly as the
// records file has them), the SNI gate's verdicts (none here, at 0 from the
// start), and a budgeted rule's limit and use, the use the datagram's
// payload exactly. Names and destinations stay out of the labels.
TEST_F(Metrics, AWorldSandboxsProxyAndBudgetsAreSeries)
{
	int mport = free_port();
	start_daemon(mport);
	std::string w = "w" + env().id;
	std::string records = env().path("world") + "/" + w + ".jsonl";
	json p = base_policy("it-metrics-world");
	p["rules"][0]["budget"] = {{"egress_bytes", 100000}};
	for (const char* cidr : {"0.0.0.0/0", "::/0"})
		p["rules"].push_back({{"action", "redirect"}, {"cidr", cidr}, {"to", "world"}});
	p["world"] = {{"records", env().path("world")}};
	std::string budgeted = env().marker("budgeted"), g1 = env().marker("get1"), g2 = env().marker("get2"),
		    dg = env().marker("datagram");
	RunSpec s;
	s.policy = env().write_policy("w.json", p);
	s.name = w;
	s.cmd = Sequence({env().py("udp_send.py", {dest4(kAllowed4, 9000), budgeted}),
			  env().py("world_client.py", {dest4(kDenied4, 80), g1, dest4(kDenied4, 80), g2}),
			  env().py("udp_send.py", {dest4(kDenied4, 9010), dg}),
			  env().py("wait_file.py", {env().path("release"), "40"})});
	Proc& runner = env().start_run(s);

	auto series = [&](const std::string& name, const std::string& labels = "") {
		return fmt::format("{}{{sandbox=\"{}\"{}}}", name, w, labels);
	};
	std::string text;
	ASSERT_TRUE(wait_until(
		[&] {
			text = scrape(mport);
			return sample(text, series("airlock_world_records_total", ",result=\"written\"")) == 3.0;
		},
		15s))
		<< text << runner.describe();
	auto lines = read_json_lines(records);
	EXPECT_EQ(lines.size(), 3u) << read_file(records);
	EXPECT_EQ(sample(text, series("airlock_world_records_total", ",result=\"dropped\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_proxy_starts_total")), 1.0) << text;
	EXPECT_EQ(sample(text, series("airlock_proxy_connections_total")), 2.0) << text;
	EXPECT_EQ(sample(text, series("airlock_proxy_connections_closed_total", ",reason=\"unknown-origin\"")), 0.0)
		<< text;
	EXPECT_EQ(sample(text, series("airlock_proxy_connections_closed_total", ",reason=\"busy\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_proxy_datagrams_total")), 1.0) << text;
	EXPECT_EQ(sample(text, series("airlock_world_requests_total", ",kind=\"http\"")), 2.0) << text;
	EXPECT_EQ(sample(text, series("airlock_world_requests_total", ",kind=\"tcp\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_world_dns_queries_total")), 0.0) << text;
	// What the clients sent: the two requests world_client.py writes, the
	// datagram.
	double sent = static_cast<double>(dg.size());
	for (const auto& m : {g1, g2})
		sent += static_cast<double>(
			fmt::format("GET /world/{} HTTP/1.1\r\nHost: 10.77.0.3:80\r\nConnection: close\r\n\r\n", m)
				.size());
	EXPECT_EQ(sample(text, series("airlock_proxy_received_bytes_total")), sent) << text;
	EXPECT_EQ(sample(text, series("airlock_sni_verdicts_total", ",verdict=\"pass\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_sni_verdicts_total", ",verdict=\"deny\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_http_gate_requests_total", ",verdict=\"pass\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_http_gate_requests_total", ",verdict=\"deny\"")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_secrets_refused_total")), 0.0) << text;
	EXPECT_EQ(sample(text, series("airlock_budget_limit_bytes", ",rule=\"0\"")), 100000.0) << text;
	EXPECT_EQ(sample(text, series("airlock_budget_used_bytes", ",rule=\"0\"")),
		  static_cast<double>(budgeted.size()))
		<< text;
	EXPECT_EQ(text.find("10.77.0.3"), std::string::npos) << "destinations are never labels";
	Result check = run({"promtool", "check", "metrics"}, 20s, text);
	EXPECT_EQ(check.status, 0) << check.describe();
	// status --json says the same.
	auto st = env().status_of(w);
	ASSERT_TRUE(st);
	EXPECT_EQ((*st)["proxy"].value("records_written", 0), 3) << st->dump();
	EXPECT_EQ((*st)["proxy"].value("proxy_starts", 0), 1) << st->dump();

	// Every query of the dashboard's world row returns data from a real
	// Prometheus scraping the daemon.
	int pport = free_port();
	Proc& prom = start_prometheus(mport, pport);
	ASSERT_TRUE(
		wait_until([&] { return query(pport, series("airlock_proxy_connections_total")) == 2.0; }, 30s, 200ms))
		<< prom.describe();
	EXPECT_EQ(query(pport, series("airlock_budget_used_bytes", ",rule=\"0\"")),
		  static_cast<double>(budgeted.size()));
	expect_dashboard_data(pport, true);

	write_file(env().path("release"), "");
	EXPECT_EQ(runner.wait(15s), std::optional<int>(0)) << runner.describe();
	EXPECT_FALSE(std::filesystem::exists(env().state_dir + "/world/" + w + ".stats.json"));
	EXPECT_EQ(scrape(mport).find(w), std::string::npos);
}

// A metrics address that cannot be listened on stops the daemon at start
// with one line naming it and why.
TEST_F(Metrics, ABusyPortStopsTheDaemonWithOneLine)
{
	int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(s, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
	ASSERT_EQ(::listen(s, 1), 0);
	ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
	std::string addr = fmt::format("127.0.0.1:{}", ntohs(a.sin_port));
	Result r = env().airlock({"daemon", "--metrics", addr}, 10s);
	::close(s);
	EXPECT_EQ(r.status, 1) << r.describe();
	// The daemon's lines start with their time.
	EXPECT_TRUE(std::regex_match(r.err, std::regex(R"(^\S+Z airlock error: metrics: cannot listen on )" + addr +
						       R"(: Address already in use\n$)")))
		<< r.describe();
	Result bad = env().airlock({"daemon", "--metrics", "localhost:x"}, 10s);
	EXPECT_EQ(bad.status, 1) << bad.describe();
	EXPECT_TRUE(std::regex_match(
		bad.err,
		std::regex(
			R"(^\S+Z airlock error: metrics: metrics address 'localhost:x': 'x' is not a port \(1-65535\)\n$)")))
		<< bad.describe();
}

}  // namespace
}  // namespace it
