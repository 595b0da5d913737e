#!/bin/sh
# e2e_postgres.sh -- a throwaway PostgreSQL server for the end-to-end tests.
#
#   sh test/e2e_postgres.sh start    create the cluster if needed and start it
#   sh test/e2e_postgres.sh dsn      print the libpq DSN for it on stdout
#   sh test/e2e_postgres.sh status   exit 0 if it is running, 3 if not
#   sh test/e2e_postgres.sh stop     stop it and delete its directory
#
# Environment (all optional):
#   PS_PG_DIR   data directory, also the socket directory (/tmp/pyroshim-pg);
#               no blanks, and short enough for a socket path
#   PS_PG_PORT  TCP port on 127.0.0.1 (54329)
#   PS_PG_USER  unprivileged account used when run as root (pgtest)
#
# PostgreSQL refuses to run as root, so as root the server runs as
# PS_PG_USER, created with useradd if missing; otherwise it runs as the
# calling user.  Either way that account is the cluster's superuser and
# connections from 127.0.0.1 are trusted, so the DSN needs no password.
# The cluster is UTF8 with the C locale, whatever the environment says.
#
# Exit status: 0 ok, 1 failure (message on stderr), 2 usage,
# 77 "skipped: ..." when the PostgreSQL server programs cannot be found
# (the automake convention for a skipped test).

set -u

PG_DIR=${PS_PG_DIR:-/tmp/pyroshim-pg}
PG_PORT=${PS_PG_PORT:-54329}
PG_USER=${PS_PG_USER:-pgtest}

die() {
	echo "e2e_postgres: $*" >&2
	exit 1
}

# The account that owns and runs the server.
pg_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		echo "$PG_USER"
	else
		id -un
	fi
}

# Set PG_BIN to the directory holding initdb and pg_ctl, or exit 77.
find_pg_bin() {
	PG_BIN=
	if command -v pg_ctl >/dev/null 2>&1 &&
	    command -v initdb >/dev/null 2>&1; then
		PG_BIN=$(dirname "$(command -v pg_ctl)")
		return 0
	fi
	# Debian keeps the server programs out of PATH; take the newest.
	for d in /usr/lib/postgresql/*/bin /usr/local/pgsql/bin; do
		[ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && PG_BIN=$d
	done
	if [ -z "$PG_BIN" ]; then
		echo "skipped: PostgreSQL server programs (initdb, pg_ctl) not found;" \
		    "install postgresql" >&2
		exit 77
	fi
}

# Run "$@" as the server's owner.  cd / first: the caller's directory may
# not be readable by that account.
as_owner() {
	if [ "$(id -u)" -ne 0 ]; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		(cd / && runuser -u "$PG_USER" -- "$@")
	else
		# shellcheck disable=SC2016 # expanded by the inner shell
		(cd / && su -s /bin/sh "$PG_USER" -c '"$0" "$@"' -- "$@")
	fi
}

ensure_owner() {
	[ "$(id -u)" -ne 0 ] && return 0
	id -u "$PG_USER" >/dev/null 2>&1 && return 0
	useradd -m "$PG_USER" || die "cannot create user $PG_USER"
}

pg_running() {
	[ -f "$PG_DIR/PG_VERSION" ] &&
	    as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1
}

# Create the cluster in PG_DIR, which must be missing or empty.  As root
# the directory is made here and handed to the owner, since the owner may
# not be allowed to create it.
init_cluster() {
	if [ -e "$PG_DIR" ] && [ -n "$(ls -A "$PG_DIR" 2>/dev/null)" ]; then
		die "$PG_DIR exists, is not empty and is not a cluster"
	fi
	mkdir -p "$PG_DIR" || die "cannot create $PG_DIR"
	chmod 700 "$PG_DIR" || die "cannot chmod $PG_DIR"
	if [ "$(id -u)" -eq 0 ]; then
		chown "$PG_USER" "$PG_DIR" || die "cannot chown $PG_DIR"
	fi
	if ! out=$(as_owner "$PG_BIN/initdb" -D "$PG_DIR" -U "$(pg_owner)" \
	    --auth=trust -E UTF8 --locale=C 2>&1); then
		printf '%s\n' "$out" >&2
		die "initdb failed"
	fi
}

cmd_start() {
	find_pg_bin
	ensure_owner
	if pg_running; then
		echo "e2e_postgres: already running in $PG_DIR" >&2
		return 0
	fi
	[ -f "$PG_DIR/PG_VERSION" ] || init_cluster
	if ! as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" \
	    -o "-k $PG_DIR -p $PG_PORT -c listen_addresses=127.0.0.1" \
	    -w -t 60 start >/dev/null; then
		tail -n 20 "$PG_DIR/server.log" >&2
		die "pg_ctl start failed (port $PG_PORT in use?)"
	fi
	echo "e2e_postgres: started in $PG_DIR, port $PG_PORT" >&2
}

cmd_stop() {
	find_pg_bin
	if pg_running; then
		as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null ||
		    die "pg_ctl stop failed"
	fi
	# Delete only what looks like our cluster, never an arbitrary path.
	if [ -f "$PG_DIR/PG_VERSION" ]; then
		rm -rf "$PG_DIR" || die "cannot remove $PG_DIR"
	fi
}

cmd_status() {
	find_pg_bin
	pg_running || exit 3
}

cmd_dsn() {
	echo "host=127.0.0.1 port=$PG_PORT dbname=postgres user=$(pg_owner)"
}

case "${1:-}" in
start)	cmd_start ;;
stop)	cmd_stop ;;
status)	cmd_status ;;
dsn)	cmd_dsn ;;
*)	echo "usage: $0 start|stop|status|dsn" >&2; exit 2 ;;
esac
