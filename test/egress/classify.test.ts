import { afterEach, describe, expect, it } from 'vitest';
import { classifyAddress } from '../../src/egress/index.js';

describe('classifyAddress', () => {
  const originalEnv = process.env.NODE_ENV;
  afterEach(() => {
    process.env.NODE_ENV = originalEnv;
  });

  it.each([
    ['8.8.8.8', 'unicast'],
    ['2606:4700::1111', 'unicast'],
    ['::ffff:8.8.8.8', 'unicast'],
  ])('admits public %s', (address, range) => {
    expect(classifyAddress(address, 'public')).toEqual({ allowed: true, range });
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['169.254.1.1', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['fd12::1', 'uniqueLocal'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['64:ff9b::a9fe:a9fe', 'rfc6052'],
    ['64:ff9b:1::a00:1', 'rfc6052'],
    ['2002:a9fe:a9fe::', '6to4'],
    ['2001::1', 'teredo'],
    ['::7f00:1', 'reserved'], // IPv4-compatible, outside 2000::/3
    ['ff02::1', 'multicast'],
    ['169.254.169.254', 'cloudMetadata'],
    ['::ffff:169.254.169.254', 'cloudMetadata'],
    ['fd00:ec2::254', 'cloudMetadata'],
    ['100.100.100.200', 'cloudMetadata'],
    ['168.63.129.16', 'cloudMetadata'],
    ['not-an-ip', 'invalid'],
  ])('blocks %s (%s) under public', (address, range) => {
    expect(classifyAddress(address, 'public')).toEqual({ allowed: false, range });
  });

  it.each(['127.0.0.1', '::1', '10.0.0.1', '172.31.255.1', '192.168.0.10', 'fd12::1', '::ffff:127.0.0.1', '8.8.8.8'])(
    'private admits %s',
    (address) => {
      expect(classifyAddress(address, 'private').allowed).toBe(true);
    },
  );

  it.each([
    '169.254.169.254',
    '169.254.10.10',
    'fe80::1',
    'fd00:ec2::254',
    'fd20:ce::254',
    '100.100.100.200',
    '168.63.129.16',
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '2002:a9fe:a9fe::',
    '100.64.0.1',
    '0.0.0.0',
    '::',
    '224.0.0.1',
  ])('private still blocks %s', (address) => {
    expect(classifyAddress(address, 'private').allowed).toBe(false);
  });

  it.each(['127.0.0.1', '169.254.169.254', 'fd00:ec2::254', 'fe80::1', '0.0.0.0'])('any admits %s', (address) => {
    expect(classifyAddress(address, 'any').allowed).toBe(true);
  });

  it('treats test-public addresses as unicast under NODE_ENV=test only', () => {
    expect(process.env.NODE_ENV).toBe('test');
    expect(classifyAddress('127.0.0.2', 'public', ['127.0.0.2'])).toEqual({ allowed: true, range: 'unicast' });
    expect(classifyAddress('::ffff:127.0.0.2', 'public', ['127.0.0.2']).allowed).toBe(true);
    expect(classifyAddress('127.0.0.1', 'public', ['127.0.0.2']).allowed).toBe(false);
    process.env.NODE_ENV = 'production';
    expect(classifyAddress('127.0.0.2', 'public', ['127.0.0.2']).allowed).toBe(false);
  });
});
