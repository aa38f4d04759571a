#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432, database "test"), MariaDB (127.0.0.1:3306, root without
# a password, database "test"), Redis (127.0.0.1:6379) and RabbitMQ (127.0.0.1:5672,
# guest/guest) answer, installing and starting them from Debian packages when they do not, and that libfaketime is there for the fault tests. Idempotent. (The RabbitMQ
# fault tests start private nodes of their own with the installed rabbitmq-server; the shared
# one serves benchmarks/submit.py --broker amqp.)
set -euo pipefail

log() { printf '[services] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() {  # port, name
  for _ in $(seq 1 60); do answers "$1" && return 0; sleep 0.5; done
  log "$2 does not answer on 127.0.0.1:$1"; return 1
}
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

start_postgres() {
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    log "installing PostgreSQL"
    apt_install postgresql postgresql-contrib
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for 5432 PostgreSQL
}

start_redis() {
  if ! command -v redis-server >/dev/null 2>&1; then
    log "installing Redis"
    apt_install redis-server
  fi
  log "starting Redis"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" \
    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/goatbeat.log
  wait_for 6379 Redis
}

start_rabbitmq() {
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    log "installing RabbitMQ"
    # The package's post-install may start the server itself (not in a container without an
    # init system); either way it is started below if it does not answer.
    apt_install rabbitmq-server
  fi
  if answers 5672; then return 0; fi
  log "starting RabbitMQ"
  # -detached: the server outlives this script. The Debian wrapper runs it as the rabbitmq
  # user, with that user's Erlang cookie (/var/lib/rabbitmq/.erlang.cookie), which rabbitmqctl
  # run as root uses too. Booting takes a few seconds, longer on a busy machine.
  as_root rabbitmq-server -detached
  for _ in $(seq 1 120); do answers 5672 && break; sleep 0.5; done
  wait_for 5672 RabbitMQ
  as_root rabbitmqctl await_startup --timeout 60 >/dev/null
}

start_mariadb() {
  if [ ! -x /usr/sbin/mariadbd ]; then
    log "installing MariaDB"
    apt_install mariadb-server
  fi
  log "starting MariaDB"
  as_root mkdir -p /run/mysqld
  as_root chown mysql:mysql /run/mysqld
  # A test server: commits are written at once but synced to disk once a second, which spares
  # each commit an fsync (the MySQL conformance run's main cost); a crash of the machine may
  # lose a second of test data, nothing else.
  as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- \
    --user=mysql --innodb-flush-log-at-trx-commit=2
  wait_for 3306 MariaDB
}

answers 5432 || start_postgres
answers 3306 || start_mariadb
answers 6379 || start_redis
answers 5672 || start_rabbitmq

# The clock-skew fault scenario runs one replica under libfaketime.
if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  log "installing faketime"
  apt_install faketime
fi

# A password lets the same URL work with trust auth (this machine) and md5/scram (a fresh
# Debian install); database "test" is where the tests create their own databases from.
psql_admin() {
  if psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
    psql -h 127.0.0.1 -U postgres -d postgres -v ON_ERROR_STOP=1 -qtAc "$1"
  else
    as_root su postgres -c "psql -d postgres -v ON_ERROR_STOP=1 -qtAc \"$1\""
  fi
}
if ! PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null 2>&1; then
  log "preparing role postgres and database test"
  psql_admin "ALTER USER postgres PASSWORD 'postgres'"
  psql_admin "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
    || psql_admin "CREATE DATABASE test"
fi
PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null

# MariaDB: root over TCP without a password (Debian's root signs in through the unix socket
# only), and database "test"; each test process creates its own databases beside it.
if ! mariadb -h 127.0.0.1 -u root -e 'select 1' test >/dev/null 2>&1; then
  log "preparing MariaDB user root@127.0.0.1 and database test"
  as_root mariadb -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    CREATE DATABASE IF NOT EXISTS test;"
fi
mariadb -h 127.0.0.1 -u root -e 'select 1' test >/dev/null
log "PostgreSQL, MariaDB, Redis and RabbitMQ answer"
