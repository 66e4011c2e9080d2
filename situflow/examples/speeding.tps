-- Speeding: each phase of a car above 70 mph that lasts 4 to 30 seconds, reported when it
-- ends with its length in readings and its average and top speed. PATTERN B needs no second
-- situation and no WITHIN: B's duration constraint bounds the match.
FROM CarSensors PARTITION BY car_id
DEFINE B AS speed > 70 mph BETWEEN 4s AND 30s
PATTERN B
RETURN first(B.car_id) AS id,
       count(B) AS readings,
       avg(B.speed) AS avg_speed,
       max(B.speed) AS max_speed;
