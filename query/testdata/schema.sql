-- The schema the query tests compile against (golden and differential).
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE users (
    id         bigint PRIMARY KEY,
    name       text NOT NULL,
    email      varchar(200),
    age        integer,
    small      smallint,
    score      numeric(10,2),
    rating     double precision,
    ratio      real,
    active     boolean,
    created_at timestamptz,
    local_ts   timestamp,
    born       date,
    wake       time,
    wake_tz    timetz,
    dur        interval,
    uid        uuid,
    data       bytea,
    code       char(5),
    tags       text[],
    meta       jsonb,
    feeling    mood,
    level      posint,
    title      text COLLATE "und-x-icu",
    handle     text COLLATE "C"
);
CREATE TABLE orders (
    id        bigint PRIMARY KEY,
    user_id   bigint,
    amount    numeric,
    status    text,
    placed_at timestamptz
);
CREATE TABLE items (
    order_id bigint,
    line     integer,
    sku      text,
    qty      integer,
    PRIMARY KEY (order_id, line)
);
CREATE TABLE skus (
    sku   text PRIMARY KEY,
    price numeric
);
CREATE TABLE nopk (x integer);
CREATE SCHEMA other;
CREATE TABLE other.accounts (
    "Id"      integer PRIMARY KEY,
    "Owner"   text,
    "select"  text
);
CREATE TABLE other.users (
    id integer PRIMARY KEY
);
