"""Both queries of issue 16 (item 7) as window SQL for DuckDB, and as Flink SQL
``MATCH_RECOGNIZE`` for ``bench/peers_flink.py``.

The DuckDB queries compute what :mod:`bench.peers_numpy` computes, with the same reasoning (its
docstrings): per symbol, the first non-rising event after an A is its only candidate C, and
``CONSUME`` keeps the latest-starting candidate per C event and every other candidate of a chain
whose members start at the previous one's C. Both order each partition by ``ts``, which is
unique within a symbol and within a car in these workloads (in general the order is time, then
position in the stream), so they run unchanged on a table or on the JSON-lines file, and return
the rows in the normal form of ``bench/peers.py``.

The Flink queries say the same in ``MATCH_RECOGNIZE``, which is contiguous within a partition
(partition contiguity) and whose ``AFTER MATCH SKIP PAST LAST ROW`` is ``CONSUME``. Two
differences of the stock query from situflow's semantics, which the workload cannot show:

* Flink's ``WITHIN`` is exclusive (``last - first < w``); SEMANTICS.md's is inclusive, so the
  stock query asks Flink for one millisecond more. No rise of 50 s occurs in the workload.
* When two matches end at the same event, Flink keeps the earliest-starting, situflow the
  latest-starting one. That needs an A inside another A's rise: 100 rises in a row.

The car query needs two changes in Flink, and one of them changes its result:

* The duration bounds cannot go into ``DEFINE``: a situation too long or too short must not
  leave a match from a later start, so the outer ``WHERE`` keeps the situations of 4–30 s.
* A situation must start at its first hot reading, not at any hot reading. ``S+ E`` says that
  (``SKIP PAST LAST ROW`` keeps the earliest start), but Flink's NFA begins a partial match at
  every hot reading and extends them all, quadratic in a situation's length: 234 s of job for
  100,000 events (100 cars, 1,000 s), against 62 s for the anchored form used here, ``P S+ E``
  with P a reading at or below 70 (``SKIP TO LAST E``: the E of one situation is the P of the
  next). Flink has no ``PREV`` ("does not support physical offsets within partition") to say
  "the reading before is not hot" otherwise. So Flink misses the situations that begin at a
  car's first reading; ``bench/peers.py`` checks that those are the only rows it misses.
"""

from __future__ import annotations

STOCK_DUCKDB = """
WITH o AS (
    SELECT symbol, ts, price, volume, row_number() OVER w AS rn,
           lag(price) OVER w AS before,
           coalesce(price > lag(price) OVER w, false) AS up
    FROM ticks WINDOW w AS (PARTITION BY symbol ORDER BY ts)
), s AS (
    -- the first position at or after each row that does not rise
    SELECT *, min(CASE WHEN NOT up THEN rn END) OVER (
               PARTITION BY symbol ORDER BY rn
               ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS stop
    FROM o
), a AS (
    SELECT symbol, rn, ts, price, lead(up) OVER w AS rises, lead(stop) OVER w AS c_rn
    FROM s WINDOW w AS (PARTITION BY symbol ORDER BY rn)
), candidate AS (
    SELECT a.symbol, a.rn AS a_rn, c.rn AS c_rn, a.ts AS first_ts, c.ts AS last_ts,
           a.price AS start, c.before AS top, c.rn - a.rn - 1 AS rises
    FROM a JOIN s AS c ON c.symbol = a.symbol AND c.rn = a.c_rn
    WHERE a.price % 100 = 0 AND a.rises AND c.volume < 150 AND c.ts - a.ts <= 50000
), latest AS (
    SELECT symbol, c_rn, arg_max(a_rn, a_rn) AS a_rn, arg_max(first_ts, a_rn) AS first_ts,
           any_value(last_ts) AS last_ts, arg_max(start, a_rn) AS start,
           any_value(top) AS top, arg_max(rises, a_rn) AS rises
    FROM candidate GROUP BY symbol, c_rn
), chained AS (
    SELECT *, coalesce(a_rn = lag(c_rn) OVER w, false) AS linked
    FROM latest WINDOW w AS (PARTITION BY symbol ORDER BY c_rn)
), chains AS (
    SELECT *, sum(CASE WHEN linked THEN 0 ELSE 1 END) OVER (
              PARTITION BY symbol ORDER BY c_rn ROWS UNBOUNDED PRECEDING) AS chain
    FROM chained
)
SELECT symbol, first_ts, last_ts, start, top, rises
FROM (SELECT *, row_number() OVER (PARTITION BY symbol, chain ORDER BY c_rn) AS place
      FROM chains)
WHERE place % 2 = 1
"""

CAR_DUCKDB = """
WITH s AS (
    SELECT car_id, ts, speed, speed > 70 AS hot,
           coalesce(lag(speed > 70) OVER (PARTITION BY car_id ORDER BY ts), false) AS was_hot
    FROM cars
), r AS (
    SELECT *, sum(CASE WHEN hot AND NOT was_hot THEN 1 ELSE 0 END) OVER (
              PARTITION BY car_id ORDER BY ts ROWS UNBOUNDED PRECEDING) AS situation
    FROM s
)
SELECT car_id, ts, te, readings, round(avg_speed, 6), max_speed
FROM (SELECT car_id, min(ts) FILTER (WHERE hot) AS ts, min(ts) FILTER (WHERE NOT hot) AS te,
             count(*) FILTER (WHERE hot) AS readings, avg(speed) FILTER (WHERE hot) AS avg_speed,
             max(speed) FILTER (WHERE hot) AS max_speed
      FROM r WHERE situation > 0 GROUP BY car_id, situation)
WHERE te - ts BETWEEN 4 AND 30
"""

STOCK_FLINK = """
SELECT symbol, first_ts, last_ts, start_price, top, rises FROM ticks
MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rt
    MEASURES A.ts AS first_ts, C.ts AS last_ts, A.price AS start_price,
             LAST(B.price) AS top, COUNT(B.price) AS rises
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C) WITHIN INTERVAL '50.001' SECOND
    DEFINE
        A AS MOD(A.price, 100) = 0,
        B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) OR B.price > LAST(B.price, 1),
        C AS C.price <= LAST(B.price) AND C.volume < 150
)
"""

CAR_FLINK = """
SELECT car_id, ts, te, readings, avg_speed, max_speed FROM cars
MATCH_RECOGNIZE (
    PARTITION BY car_id ORDER BY rt
    MEASURES FIRST(S.ts) AS ts, E.ts AS te, COUNT(S.speed) AS readings,
             AVG(S.speed) AS avg_speed, MAX(S.speed) AS max_speed
    ONE ROW PER MATCH
    AFTER MATCH SKIP TO LAST E
    PATTERN (P S+ E)
    DEFINE
        P AS P.speed <= 70,
        S AS S.speed > 70,
        E AS E.speed <= 70
)
WHERE te - ts BETWEEN 4 AND 30
"""
