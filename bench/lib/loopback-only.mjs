// Preloaded (`node --import`) into peers that have no listen-address option, so that every
// TCP server they open binds 127.0.0.1 and nothing else.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    if (first.path === undefined) args[0] = { ...first, host: '127.0.0.1' };
    return listen.apply(this, args);
  }
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    const cb = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
    return cb ? listen.call(this, { port: Number(first), host: '127.0.0.1' }, cb) : listen.call(this, { port: Number(first), host: '127.0.0.1' });
  }
  if (first === undefined || typeof first === 'function') return listen.call(this, { port: 0, host: '127.0.0.1' }, first);
  return listen.apply(this, args);
};
