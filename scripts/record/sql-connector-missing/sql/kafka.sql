CREATE TABLE orders (
  order_id BIGINT,
  customer STRING,
  amount DECIMAL(10, 2),
  ts TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'properties.bootstrap.servers' = 'kafka-1.acme.internal:9092',
  'properties.group.id' = 'order-totals',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json'
);

CREATE TABLE order_totals (
  customer STRING,
  total DECIMAL(10, 2)
) WITH ('connector' = 'print');

INSERT INTO order_totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;
