-- Aggressive drivers (thesis Listing 5.1), with standard Allen relation names:
-- the thesis' "B finishes C" is "B finished-by C" (see README, Semantics).
FROM CarSensors PARTITION BY car_id
DEFINE A AS accel > 8m/s2 AT LEAST 5s,
       B AS speed > 70 mph BETWEEN 4s AND 30s,
       C AS accel < -9m/s2 AT LEAST 3s
PATTERN A meets;overlaps;starts;during B
    AND B contains;finished-by;overlaps;meets C
    AND A before C
WITHIN 5 minutes
RETURN first(B.car_id) AS id,
       avg(B.speed) AS avg_speed;
