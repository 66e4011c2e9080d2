-- The EDBT'18 form (Listing 1): stream alias, one triple per alternative, either order.
-- "B finishes C" of the paper is "C finishes B" in standard Allen.
FROM   CarSensors CS PARTITION BY CS.car_id
DEFINE A AS CS.accel > 8m/s2 at least 5s,
       B AS CS.speed > 70 mph between 4s AND 30s,
       C AS CS.accel < -9m/s2 at least 3s
PATTERN A meets B; A overlaps B; A starts B; A during B
        AND C during B; C finishes B; B overlaps C; B meets C
        AND A before C
WITHIN 5 MINUTES
RETURN first(B.car_id) AS id,
        avg(B.speed) AS avg_speed;
