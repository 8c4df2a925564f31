"""--command-config files are read by Java's properties rules, as Kafka's tools read them."""

from __future__ import annotations

from cli_helpers import run_odradek


def test_command_config_follows_java_properties_rules(tmp_path, broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    path = tmp_path / "client.properties"
    path.write_text(
        "! a comment in Java's other style\n"
        f"bootstrap.servers = {host}:\\\n"
        f"        {port}\n"
        "client.id ops-cli\n"
        "request.timeout.ms : 5000   \n"
    )
    r = run_odradek("cluster", "--command-config", path)
    assert r.code == 0, r
    assert str(port) in r.out


def test_command_config_with_a_malformed_escape_names_file_and_line(tmp_path, broker):
    path = tmp_path / "client.properties"
    path.write_text("client.id=ops\nrequest.timeout.ms=\\u50x0\n")
    r = run_odradek("cluster", "--command-config", path, "--bootstrap-server", broker.bootstrap_servers)
    assert r.code == 1, r
    assert f"{path}:2: malformed \\uxxxx escape" in r.err
